"""Signed checkpoints of the chain: C2SP signed notes, where they are kept, and when to write one.

A checkpoint is a signed note (c2sp.org/signed-note, Ed25519, signature type 0x01) whose text
follows the layout of c2sp.org/tlog-checkpoint::

    agent-custody-state/chain/<event id of the ledger's first event>
    <size: events covered>
    <base64 of the chain head after them>
    time <wire time it was signed>

    — agent-custody-state/chain/<...> <base64(4-byte key ID || 64-byte signature)>

The hash line is the head of this ledger's hash chain (``chain``), not an RFC 6962 tree root,
which the ``/chain/`` in the origin says. The key name is the origin; the key ID is
``SHA-256(name || 0x0A || 0x01 || 32-byte public key)[:4]`` as the signed-note spec recommends.

Checkpoints are kept in a ``CheckpointLog`` (``checkpoint_logs``): a text file of notes separated
by an empty line (``<ledger>.checkpoints`` beside a JSONL ledger, or any path given), a table
beside a SQL ledger's events, or a list in memory; ``EventBackend.checkpoint_log`` says which.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_custody_state.ledger.chain import ChainHead, ChainWriter
from agent_custody_state.ledger.checkpoint_logs import SIGNATURE as _DASH
from agent_custody_state.ledger.checkpoint_logs import CheckpointLog as CheckpointLog
from agent_custody_state.ledger.checkpoint_logs import FileCheckpointLog as FileCheckpointLog
from agent_custody_state.ledger.checkpoint_logs import MemoryCheckpointLog as MemoryCheckpointLog
from agent_custody_state.ledger.checkpoint_logs import split_notes as split_notes
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.timeutil import format_time, utc_now

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

    #: The key, or the keys (those before and after a rotation), checkpoints are checked by.
    VerifyKeys = Ed25519PublicKey | Sequence[Ed25519PublicKey]

    from agent_custody_state.ledger.backend import EventBackend

# ``cryptography`` and the key helpers are imported where a key is used: opening a ledger (and
# ``agent-custody-memory --help``) must not load the bindings when nothing is signed.

ORIGIN_PREFIX = "agent-custody-state/chain/"
#: The origin of a ledger without events (no first event names it).
EMPTY_ORIGIN = ORIGIN_PREFIX + "-"
ED25519 = b"\x01"
#: tlog-checkpoint's tree size: ASCII decimal, no leading zero; at most 2**64 - 1, as every
#: implementation of the format reads it (a uint64).
_SIZE = re.compile(r"0|[1-9][0-9]{0,19}")
_MAX_SIZE = 2**64 - 1


class CheckpointError(ValueError):
    """A checkpoint that cannot be parsed; the message says what is wrong."""


def note_key_id(name: str, public_key: Ed25519PublicKey) -> bytes:
    """The 4-byte signed-note key ID of an Ed25519 key under ``name``."""
    from agent_custody_state.keys import raw_public_bytes

    data = name.encode("utf-8") + b"\n" + ED25519 + raw_public_bytes(public_key)
    return hashlib.sha256(data).digest()[:4]


@dataclass(frozen=True)
class Checkpoint:
    """One parsed checkpoint: what it states and the signatures on it."""

    origin: str
    size: int
    head: str  # hex
    time: str
    text: str  # the signed note text, final newline included
    signatures: tuple[tuple[str, bytes, bytes], ...] = field(default=())  # (name, key id, sig)

    def note(self) -> str:
        lines = [
            f"{_DASH}{name} {base64.b64encode(kid + sig).decode('ascii')}"
            for name, kid, sig in self.signatures
        ]
        return self.text + "\n" + "\n".join(lines) + "\n"

    def check_signature(self, public_key: VerifyKeys) -> str | None:
        """None if a signature by ``public_key`` (or by one of several keys: the keys of a
        rotation) under the origin as key name verifies, else why not. Signatures by other keys
        are ignored, and one by a key given that does not verify fails the note, as the
        signed-note spec requires."""
        from cryptography.exceptions import InvalidSignature

        keys = [public_key] if not isinstance(public_key, Sequence) else list(public_key)
        wanted = {note_key_id(self.origin, key): key for key in keys}
        mine = [
            (wanted[kid], sig)
            for name, kid, sig in self.signatures
            if name == self.origin and kid in wanted
        ]
        if not mine:
            return self._unsigned(keys)
        for key, sig in mine:
            try:
                key.verify(sig, self.text.encode("utf-8"))
            except InvalidSignature:
                return "its signature does not verify: the checkpoint was altered, or forged"
        return None

    def _unsigned(self, given: list[Ed25519PublicKey]) -> str:
        """Why no key given signed it: the keys given (their key id, as ``keygen`` prints it,
        and their note key ID) and the note key IDs of the signatures under its origin."""
        from agent_custody_state.keys import key_id

        which = "the key given" if len(given) == 1 else f"any of the {len(given)} keys given"
        shown = "; ".join(
            f"key id {key_id(key)[:16]}, note key ID {note_key_id(self.origin, key).hex()}"
            for key in given
        )
        found = sorted({kid.hex() for name, kid, _ in self.signatures if name == self.origin})
        signed = (
            f"it is signed by note key ID {', '.join(found)}; pass that key's public key "
            "(--key, repeatable for the keys before and after a rotation)"
            if found
            else f"no signature on it is under its origin {self.origin}"
        )
        return f"not signed by {which} ({shown}): {signed}"


def of_no_ledger(cp: Checkpoint) -> bool:
    """A checkpoint signed while its ledger had no event (an older version signed one): it
    states nothing of any ledger."""
    return cp.origin == EMPTY_ORIGIN and cp.size == 0


def checkpoint_text(origin: str, head: ChainHead, time: str) -> str:
    head_b64 = base64.b64encode(bytes.fromhex(head.hash)).decode("ascii")
    return f"{origin}\n{head.seq}\n{head_b64}\ntime {time}\n"


def sign_checkpoint(key: Ed25519PrivateKey, origin: str, head: ChainHead, time: str) -> Checkpoint:
    text = checkpoint_text(origin, head, time)
    signature = key.sign(text.encode("utf-8"))
    kid = note_key_id(origin, key.public_key())
    return Checkpoint(origin, head.seq, head.hash, time, text, ((origin, kid, signature),))


def parse_checkpoint(note: str) -> Checkpoint:
    """Parse one signed note; ``CheckpointError`` says what is wrong."""
    if "\r\n" in note:  # else read as "no empty line": there is one, as CR LF
        raise CheckpointError(
            "its lines end in CR LF: a signed note's lines end in LF alone, and its signature "
            "covers them (the file was converted: convert it back, e.g. with dos2unix)"
        )
    text, sep, sigs = note.rpartition("\n\n")
    if not sep or not text:
        raise CheckpointError("not a signed note: no empty line before the signatures")
    text += "\n"
    lines = text.split("\n")[:-1]
    if len(lines) < 3:
        raise CheckpointError("a checkpoint has at least three lines: origin, size, hash")
    origin, size_text, head_b64 = lines[:3]
    if not _SIZE.fullmatch(size_text) or int(size_text) > _MAX_SIZE:
        raise CheckpointError(
            f"the size line {size_text[:40]!r} is not a decimal number (ASCII digits, no leading "
            "zero, below 2**64)"
        )
    try:
        head = base64.b64decode(head_b64, validate=True)
    except ValueError:
        head = b""
    if len(head) != 32:
        raise CheckpointError(f"the hash line {head_b64!r} is not a base64 SHA-256 hash")
    time = next((line[5:] for line in lines[3:] if line.startswith("time ")), "")
    signatures = []
    for line in sigs.strip("\n").split("\n"):
        if not line.startswith(_DASH):
            raise CheckpointError(f"not a signature line: {line[:60]!r}")
        name, _, b64 = line[len(_DASH) :].rpartition(" ")
        try:
            raw = base64.b64decode(b64, validate=True)
        except ValueError:
            raw = b""
        if not name or len(raw) < 5:
            raise CheckpointError(f"malformed signature line: {line[:60]!r}")
        signatures.append((name, raw[:4], raw[4:]))
    return Checkpoint(origin, int(size_text), head.hex(), time, text, tuple(signatures))


def read_checkpoints(content: str) -> list[Checkpoint]:
    return [parse_checkpoint(note) for note in split_notes(content)]


class Checkpointer:
    """Signs a checkpoint when the chain crosses a multiple of ``every`` events, and on demand.

    ``origin`` is called once, lazily (it names the ledger by its first event); ``now`` gives
    the wire time to record.
    """

    def __init__(
        self,
        key: Ed25519PrivateKey,
        log: CheckpointLog,
        *,
        every: int | None,
        origin: Callable[[], str],
        now: Callable[[], str],
    ) -> None:
        self.key = key
        self.log = log
        self.every = every
        self._origin = origin
        self._origin_value: str | None = None
        self._now = now

    @property
    def origin(self) -> str:
        if self._origin_value is None:
            origin = self._origin()
            if origin.endswith("/-"):  # an empty ledger: ask again once it has an event
                return origin
            self._origin_value = origin
        return self._origin_value

    def progressed(self, before: int, head: ChainHead) -> Checkpoint | None:
        """The chain went from ``before`` events to ``head``: checkpoint it if it crossed a
        multiple of ``every``."""
        if self.every is None or head.seq // self.every <= before // self.every:
            return None
        return self.checkpoint(head)

    def checkpoint(self, head: ChainHead) -> Checkpoint:
        if self.origin == EMPTY_ORIGIN:
            # It would name no ledger: once the first event is written it reads as another
            # ledger's checkpoint, and every later ``verify`` fails on it.
            raise LedgerError(
                "the ledger has no events: a checkpoint names its ledger by its first event, so "
                "there is nothing to sign yet"
            )
        cp = sign_checkpoint(self.key, self.origin, head, self._now())
        self.log.add(cp.note())
        return cp


def ledger_origin(backend: EventBackend) -> str:
    """The checkpoint origin of a ledger: named by the id of its first event, which no later
    write changes (``-`` while it is empty)."""
    first = backend.first_event()
    return ORIGIN_PREFIX + (first.event_id if first is not None else "-")


def open_checkpoint_log(backend: EventBackend, where: Any = None) -> CheckpointLog:
    """``where`` (a path or a ``CheckpointLog``), else the backend's own log; ``ValueError`` if
    the backend keeps none and no path was given."""
    if isinstance(where, CheckpointLog):
        return where
    if where is not None:
        return FileCheckpointLog(where)
    log = backend.checkpoint_log()
    if log is None:
        raise ValueError(
            f"{backend.kind} ledgers keep no checkpoints of their own; give a file for them "
            "(checkpoints=PATH, --checkpoints PATH)"
        )
    return log


def chain_writer(
    backend: EventBackend, enabled: bool = True, *, key: Any, every: int | None, where: Any
) -> ChainWriter:
    """The ledger's ``ChainWriter``, with a checkpointer when there is a ``key`` to sign with
    (an Ed25519 private key, or its PKCS8 PEM file or bytes): it signs a checkpoint each time
    the chain passes a multiple of ``every`` events, and on demand, into ``where`` (a path or a
    ``CheckpointLog``; None: the backend's own). ``LedgerError`` for settings that cannot work."""
    if key is None:
        if every is not None:
            raise LedgerError(
                "checkpoint_every needs a checkpoint_key to sign them with",
                field="checkpoint_every",
            )
        return ChainWriter(enabled=enabled)
    if every is not None and (isinstance(every, bool) or not isinstance(every, int) or every < 1):
        raise LedgerError(
            "checkpoint_every must be a whole number of events, at least 1",
            field="checkpoint_every",
        )
    from agent_custody_state.keys import load_private_key

    try:
        log = open_checkpoint_log(backend, where)
    except (ValueError, TypeError) as exc:  # a path of the wrong type: a bare TypeError before
        raise LedgerError(_named("checkpoints", exc), field="checkpoints") from None
    try:
        private = load_private_key(key)
    except (ValueError, TypeError) as exc:
        raise LedgerError(_named("checkpoint_key", exc), field="checkpoint_key") from None
    checkpointer = Checkpointer(
        private, log, every=every, origin=lambda: ledger_origin(backend), now=_wire_now
    )
    return ChainWriter(enabled=enabled, checkpointer=checkpointer)


def _named(field: str, exc: Exception) -> str:
    return str(exc) if isinstance(exc, ValueError) else f"{field}: {exc}"


def _wire_now() -> str:
    return format_time(utc_now())

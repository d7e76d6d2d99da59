"""Checking a ledger's chain: every leaf, every link, every commitment, every checkpoint.

``verify_lines`` reads the events as stored (JSON text, one per event, in append order) and
streams: what it keeps is the running head, the asserts marked forgotten whose forget event
has not come yet, and 16 bytes per assert holding a value (``verdict.Forgets``).
It does not stop at the first problem: after one it re-anchors on the stored head, so each later
problem is found on its own, and the report names the first bad sequence number. What each
problem means is in ``docs/proofs.md`` ("What verify checks").
"""

from __future__ import annotations

import binascii
import hashlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from agent_custody_state import fastjson
from agent_custody_state.canonical import canonical_utf8
from agent_custody_state.ledger import verdict
from agent_custody_state.ledger.chain import CHAIN_KEY, COMMITMENT_KEY, SALT_KEY
from agent_custody_state.ledger.checkpoints import Checkpoint
from agent_custody_state.ledger.digests import hmac_sha256
from agent_custody_state.ledger.envelope import kid_of
from agent_custody_state.ledger.storedhashes import hex32, leaf_hash, loads
from agent_custody_state.ledger.storedhashes import stored_head as stored_head
from agent_custody_state.ledger.verdict import State, VerifyReport, signatures

if TYPE_CHECKING:
    from agent_custody_state.ledger.checkpoints import VerifyKeys

#: Opens a crypto-shred envelope: ``(fact id, envelope) -> value``, raising ``LookupError`` when
#: its key is gone (a problem: only a fact not forgotten holds an envelope; a key store that is
#: not this ledger's shows every value so), ``ValueError`` when it does not authenticate.
OpenValue = Callable[[str, Any], Any]


class Verifier:
    """The checks of ``verify_lines``, one event at a time (``parallel`` runs them on chunks)."""

    def __init__(
        self,
        checkpoints: Iterable[Checkpoint],
        open_value: OpenValue | None = None,
        *,
        log: bool = False,
        stable: bool = False,
    ) -> None:
        self.report = VerifyReport()
        self.open_value = open_value
        # With a log (a chunk verified in a worker, ``parallel``): what touches ``pending`` is
        # recorded in order instead, and replayed by the process that merges the chunks.
        self.log: list[tuple[Any, ...]] | None = [] if log else None
        self.sealed = 0  # crypto-shred values whose commitment could not be checked
        self.running = bytes(32)  # head after the events seen so far (computed, re-anchored)
        self.started = False
        # Events without a record since the last chained one: (first, last), or None.
        self.gap: tuple[int, int] | None = None
        self.pending: dict[str, tuple[int, dict[str, Any]]] = {}  # fact id -> (seq, forgotten)
        self.forgets = verdict.Forgets(stable=stable)  # ``parallel`` says when processes differ
        self.restored = verdict.RestoredKeys(getattr(open_value, "restored", None))
        self._unknown_link = False  # the previous event could not be read: skip the next link
        self.by_size: dict[int, list[Checkpoint]] = {}
        for cp in checkpoints:
            self.by_size.setdefault(cp.size, []).append(cp)

    def event(self, seq: int, text: str | bytes) -> None:
        report = self.report
        try:
            data = loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            report.add(seq, f"not a valid JSON event ({exc})")
            self.running = bytes(32)
            self.gap = None
            self._unknown_link = True
            return
        if not isinstance(data, dict):
            report.add(seq, "not a JSON object")
            return
        twice = fastjson.duplicate_keys(text, data)
        record = data.pop(CHAIN_KEY, None)
        fact = data.get("fact") if data.get("kind") == "assert" else None
        value: Any = None
        salt: Any = None
        forgotten: Any = None
        if isinstance(fact, dict):
            # The redacted form (``chain.redacted``): what a forget changes is left out.
            value = fact.pop("value", None)
            salt = fact.pop(SALT_KEY, None)
            forgotten = fact.pop("forgotten", None)
            if forgotten is None:
                self.forgets.holds(str(fact.get("factId")), seq)
        leaf = leaf_hash(data, record.get("leaf") if type(record) is dict else None)
        leaf_hex = leaf.hex()
        if twice:
            report.add(seq, verdict.TWICE_FORGOTTEN if forgotten is not None else verdict.TWICE)
        if isinstance(fact, dict) and COMMITMENT_KEY in fact:
            self._commitment(seq, fact, value, salt, forgotten)
        elif data.get("kind") == "forget":
            # Only an intact forget event can tell its assert's certificate was edited.
            intact = record is None or (isinstance(record, dict) and record.get("leaf") == leaf_hex)
            self._forget(seq, data, intact)
        if (
            # The common case, decided without parsing the hashes: a well-formed record that
            # extends the running head (``_chained`` reaches the same state with no problem).
            type(record) is dict
            and self.started
            and self.gap is None
            and not self._unknown_link
            and type(record.get("seq")) is int
            and record["seq"] == seq
            and "genesis" not in record
            and record.get("leaf") == leaf_hex
        ):
            head = hashlib.sha256(b"\x01" + self.running + leaf).digest()
            if record.get("head") == head.hex():
                self.running = head
                for cp in self.by_size.get(seq, ()):
                    self._checkpoint(seq, cp)
                return
        if record is None:
            ours = salt is not None or (isinstance(fact, dict) and COMMITMENT_KEY in fact)
            self._unchained(seq, leaf, ours)
        else:
            self._chained(seq, record, leaf)
        for cp in self.by_size.get(seq, ()):
            self._checkpoint(seq, cp)

    def state(self) -> State:
        """What the next event's checks depend on, besides ``pending`` (``parallel``)."""
        return State(self.running, self.started, self.gap, self._unknown_link)

    def resume(self, state: State) -> None:
        self.running, self.started, self.gap, self._unknown_link = state

    def _unchained(self, seq: int, leaf: bytes, ours: bool) -> None:
        if ours:
            self.report.add(
                seq, "the event has a value commitment but no chain record: the record was removed"
            )
        self.running = hashlib.sha256(b"\x01" + self.running + leaf).digest()
        if self.started:
            self.gap = (self.gap[0] if self.gap else seq, seq)

    def _chained(self, seq: int, record: Any, leaf: bytes) -> None:
        report = self.report
        if not isinstance(record, dict):
            report.add(seq, "the chain record is not an object")
            self._unknown_link = True
            return
        stored_leaf = hex32(record.get("leaf"))
        stored_head = hex32(record.get("head"))
        if type(record.get("seq")) is not int or record["seq"] != seq:
            report.add(
                seq,
                f"the chain record says seq {record.get('seq')!r} but this is event {seq}: "
                "an event before it was deleted or inserted, or events were reordered",
            )
        if stored_leaf is None or stored_head is None:
            report.add(seq, "the chain record's leaf or head is not a hex SHA-256 hash")
            self._unknown_link = True
            return
        if stored_leaf != leaf:
            report.add(seq, "the event does not match its leaf hash: its content was edited")
        genesis = record.get("genesis")
        previous = self.running
        if genesis is not None:
            self._genesis(seq, genesis)
        elif not self.started:
            report.add(seq, "the first chained event has no genesis record")
        elif self.gap:
            report.add(
                self.gap[0],
                f"events {self.gap[0]}..{self.gap[1]} carry no chain record, and the "
                f"next chained event ({seq}) has no genesis covering them",
            )
        if (
            not self._unknown_link
            and hashlib.sha256(b"\x01" + previous + stored_leaf).digest() != stored_head
        ):
            report.add(seq, "the chain head does not follow from the previous head and this leaf")
        self._unknown_link = False
        self.started = True
        if report.genesis is None:
            report.genesis = seq
        self.gap = None
        self.running = stored_head

    def _genesis(self, seq: int, genesis: Any) -> None:
        report = self.report
        head = hex32(genesis.get("head")) if isinstance(genesis, dict) else None
        if head is None or not isinstance(genesis.get("size"), int):
            report.add(seq, "the genesis record is malformed")
            return
        if genesis["size"] != seq - 1:
            report.add(
                seq,
                f"the genesis record covers {genesis['size']} events, but {seq - 1} come before it",
            )
        elif head != self.running and not self._unknown_link:
            report.add(
                seq,
                f"the {seq - 1} events before the genesis at {seq} do not hash to its record: "
                "one of them was edited, deleted or reordered",
            )
        if self.gap:
            report.notes.append(
                f"events {self.gap[0]}..{self.gap[1]} were written without a chain record "
                f"(by another implementation); the genesis at {seq} covers them"
            )
        elif self.started:
            report.add(seq, "a genesis record in the middle of the chain")

    def _commitment(
        self, seq: int, fact: dict[str, Any], value: Any, salt: Any, forgotten: Any
    ) -> None:
        report = self.report
        if forgotten is not None:
            if value is not None:
                report.add(seq, "the fact is marked forgotten but still holds a value")
            if salt is not None:
                report.notes.append(f"event {seq}: a forgotten fact kept its value salt")
            if isinstance(forgotten, dict):
                self.remember(str(fact.get("factId")), seq, forgotten)
            else:
                report.add(seq, "the forgotten certificate is not an object")
            return
        if not isinstance(salt, str):
            report.add(seq, "the value salt is missing: the value was removed without a forget")
            return
        if kid_of(value) is not None:  # crypto-shred: the commitment is over the plaintext
            if self.open_value is None:
                self.sealed += 1
                return
            try:
                value = self.open_value(str(fact.get("factId")), value)
            except LookupError:  # a forget nulls the value: a live fact's key must be there
                report.add(seq, verdict.NO_KEY)
                return
            except ValueError:
                report.add(seq, "the sealed value does not open with its key: it was edited")
                return
        try:
            key = binascii.a2b_base64(salt, strict_mode=True)
        except (ValueError, binascii.Error):
            key = b""
        if binascii.b2a_base64(key, newline=False) != salt.encode():  # another spelling too
            report.add(seq, "the value salt is not the base64 the chain writes")
            return
        stored = fact[COMMITMENT_KEY]
        fast = fastjson.sorted_unchecked(value)  # first try: see ``storedhashes.leaf_hash``
        if fast is not None and hmac_sha256(key, fast).hex() == stored:
            return
        if hmac_sha256(key, canonical_utf8(value)).hex() != stored:
            report.add(seq, "the value does not match its commitment: the value was edited")

    def remember(self, fact_id: str, seq: int, forgotten: dict[str, Any]) -> None:
        """An assert marked forgotten, waiting for its forget event."""
        if self.log is not None:
            self.log.append((fact_id, seq, forgotten))
        else:
            self.pending[fact_id] = (seq, forgotten)
            self.restored.add(seq, fact_id)  # with a key store: its keys must be gone

    def _forget(self, seq: int, data: dict[str, Any], intact: bool) -> None:
        said = (data.get("valueDigest"), data.get("digestKind"), data.get("txTime"))
        self.forgot(str(data.get("factId")), seq, said, intact)

    def forgot(self, fact_id: str, seq: int, said: tuple[Any, Any, Any], intact: bool) -> None:
        """A forget event at ``seq`` that states ``(valueDigest, digestKind, txTime)``."""
        if self.log is not None:
            self.log.append((fact_id, seq, said, intact))
            return
        found = self.pending.pop(fact_id, None)
        if not intact:
            return
        self.forgets.forgot(fact_id, seq)
        if found is None:
            return
        assert_seq, forgotten = found
        if (forgotten.get("valueDigest"), forgotten.get("digestKind"), forgotten.get("at")) != said:
            self.report.add(
                assert_seq,
                f"the fact's forgotten certificate differs from its forget event ({seq})",
            )

    def _checkpoint(self, seq: int, cp: Checkpoint) -> None:
        self.report.checkpoints_checked += 1
        if cp.head != self.running.hex():
            self.report.add(
                seq,
                f"the checkpoint of size {cp.size} (signed {cp.time or 'at an unknown time'}) "
                "states another head: events up to here were rewritten",
            )

    def finish(self, count: int) -> VerifyReport:
        report = self.report
        report.events = count
        if self.sealed:
            report.notes.append(
                f"{self.sealed} value(s) sealed by crypto-shred mode: their commitments were not "
                "checked without their keys (the leaves and links were; each sealed value is "
                "bound to its fact by its AES-GCM tag)"
            )
        report.head = self.running.hex()
        if self.gap:
            report.add(self.gap[0], f"events {self.gap[0]}..{self.gap[1]} carry no chain record")
        for seq, why in [*self.forgets.problems(), *self.restored.problems()]:
            report.add(seq, why)
        truncated = any(size > count for size in self.by_size)
        last_bad = max((p.seq for p in report.problems), default=0)
        for fact_id, (seq, _) in self.pending.items():
            if truncated or last_bad > seq:  # its forget event may be the missing or bad one
                report.notes.append(f"fact {fact_id} (event {seq}) has no forget event left")
            else:
                report.add(
                    seq, f"fact {fact_id} is marked forgotten, but no forget event records it"
                )
        for size, cps in self.by_size.items():
            if size > count:
                report.checkpoints_checked += len(cps)
                report.add(
                    count + 1,
                    f"a checkpoint covers {size} events, the ledger has {count}: events "
                    f"{count + 1}..{size} are missing (truncated)",
                )
        if report.genesis is None and count:
            report.notes.append(
                f"no chained event yet: the {count} events were written before the chain "
                "(the next write starts it with a genesis record)"
            )
        return report


def verify_lines(
    lines: Iterable[str | bytes],
    *,
    checkpoints: Iterable[Checkpoint] = (),
    public_key: VerifyKeys | None = None,
    open_value: OpenValue | None = None,
) -> VerifyReport:
    """Verify a ledger given as its stored events (JSON text each, in append order) and, when
    given, checkpoints of it; with ``public_key`` each checkpoint's signature is checked too.
    ``open_value`` opens crypto-shred envelopes, so their values' commitments are checked."""
    checkpoints = list(checkpoints)
    verifier = Verifier(checkpoints, open_value)
    seq = 0
    for seq, text in enumerate(lines, 1):
        verifier.event(seq, text)
    return signatures(verifier.finish(seq), checkpoints, public_key)

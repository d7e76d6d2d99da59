"""The forget mode: the argument, the mark a ledger records of it, and who may write what.

A ledger written in crypto-shred mode must not take plaintext values from a process that was
only started without the mode (a script, a second server, an operator's shell): those values
would sit unencrypted beside the sealed ones, out of crypto-shred's reach. The mode is a
property of the ledger, not of one process, so a crypto-shred opener records it where every
later opener reads it, and a plain-mode opener refuses to write values (``shred``):

* a JSONL ledger: a sidecar file ``<ledger>.mode`` beside the file itself, every symlink
  resolved (``ModeFile``); the original reads only the ledger file;
* a SQL ledger: a table ``<events table>_settings`` beside its events, which the original,
  reading only the events table, ignores;
* older file ledgers, written before the mark existed: their default key store beside them
  (``<ledger>.keys``, ``SidecarKeys``) says the same;
* any ledger written before the mark existed, whatever its backend and key store: its newest
  value sealed (``sealed_unmarked``).

The mark is one small JSON object: the mode, and where its key store was (the display form,
which never holds a password), so the refusal can say what to open the ledger with. A plain
ledger records nothing: the absence of a mark means plain.

The checks a plain-mode ledger makes live here too: ``check_plain_values`` (no value into a
marked ledger) and ``check_plain_forget`` (no forget of a sealed value, whose key would
survive); ``forget_mode_arg`` validates the mode a caller names.
"""

from __future__ import annotations

import json
import os
import weakref
from contextlib import suppress
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state.ledger.envelope import kid_of
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.files import PRIVATE_MODE, names_of
from agent_custody_state.ledger.model import AssertEvent

if TYPE_CHECKING:
    from agent_custody_state.ledger.backend import EventBackend

CRYPTO_SHRED = "crypto-shred"

FORGET_MODES = ("plain", "crypto-shred")

#: How many events, newest first, a ledger without a mark is read for its newest value.
LOOK_BACK = 256

#: ``sealed_unmarked``'s answer per backend object: a ledger's past does not change.
_SEALED: weakref.WeakKeyDictionary[EventBackend, bool] = weakref.WeakKeyDictionary()


def forget_mode_arg(mode: object) -> str:
    """``mode`` if it names a forget mode, else ``LedgerError`` naming the choices."""
    if mode not in FORGET_MODES:
        raise LedgerError(
            f'forget_mode must be "plain" or "crypto-shred"; got {mode!r}', field="forget_mode"
        )
    return str(mode)


@dataclass(frozen=True)
class ModeMark:
    """What a ledger records of its forget mode: ``mode`` ("crypto-shred") and the display
    location of the key store its writer used (None when not known). ``inferred``: not
    recorded, but told from something else (a default key store beside a file ledger written
    before the mark existed); a crypto-shred opener then records it, so that moving the key
    store away does not make the ledger read as plain. Not part of what is stored."""

    mode: str
    key_store: str | None = None
    inferred: bool = field(default=False, compare=False)

    def to_json(self) -> str:
        return json.dumps({"forget_mode": self.mode, "key_store": self.key_store})

    @classmethod
    def from_mapping(cls, data: Any, where: str) -> ModeMark:
        """The mark in ``data`` (a dict read back); ``EventBackendError`` naming ``where`` when
        it is not one (a mark that cannot be read must not be taken for "plain")."""
        mode = data.get("forget_mode") if isinstance(data, dict) else None
        store = data.get("key_store") if isinstance(data, dict) else None
        if not isinstance(mode, str) or not (store is None or isinstance(store, str)):
            raise EventBackendError(f"{where}: not a forget-mode mark ({data!r:.80})")
        return cls(mode, store)


class ModeFile:
    """For an event backend whose events are one file (``path``): the mark in ``<file>.mode``
    beside the file itself, whatever spelling ``path`` is (``files.FileNames``), written once,
    atomically (a temporary file renamed into place, then the folder synced).

    A mark an older version wrote beside a symlink (``<link>.mode``), when none is beside the
    file, is read as ``inferred``: a crypto-shred opener records it beside the file, where
    every spelling finds it, and a plain opener through any spelling is refused values."""

    path: Path

    def _mode_path(self) -> str:
        return f"{names_of(self).real}.mode"

    def recorded_forget_mode(self) -> ModeMark | None:
        where, inferred = self._mode_path(), False
        try:
            text = _read_mark(where)
            if text is None:
                older = names_of(self).legacy("mode")
                if not older:
                    return super().recorded_forget_mode()  # type: ignore[misc, no-any-return]
                where, inferred = str(older[0]), True
                text = _read_mark(where)
                if text is None:  # removed meanwhile
                    return super().recorded_forget_mode()  # type: ignore[misc, no-any-return]
        except OSError as exc:
            raise EventBackendError(f"{where}: cannot read the forget-mode mark: {exc}") from None
        try:
            data = json.loads(text)
        except ValueError:
            data = text
        mark = ModeMark.from_mapping(data, where)
        return ModeMark(mark.mode, mark.key_store, inferred=True) if inferred else mark

    def record_forget_mode(self, mark: ModeMark) -> None:
        where = self._mode_path()
        temporary = f"{where}.{os.getpid()}.tmp"
        try:
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_MODE)
            os.fchmod(descriptor, PRIVATE_MODE)  # owner-only whatever the umask, as the ledger
            with open(descriptor, "w", encoding="utf-8") as handle:
                handle.write(mark.to_json() + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, where)
            folder = os.open(os.path.dirname(os.path.abspath(where)), os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)
        except OSError as exc:
            with suppress(OSError):
                os.unlink(temporary)
            raise EventBackendError(f"{where}: cannot record the forget mode: {exc}") from None


def _read_mark(where: str) -> str | None:
    """The text of the mark file ``where``, None if there is none."""
    try:
        with open(where, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def check_plain_forget(mode: str, event: AssertEvent) -> None:
    """Refuse a plain-mode forget of a value written in crypto-shred mode: it would leave the
    key alive, so every earlier copy of the events would still open."""
    if mode == "plain" and kid_of(event.fact.value) is not None:
        raise LedgerError(
            f"fact {event.fact_id} was written in crypto-shred mode: forget it in that mode "
            '(forget_mode="crypto-shred", on the command line --forget-mode crypto-shred) with '
            "its key store, so that its key is destroyed",
            code="crypto_shred",
        )


def check_plain_values(mode: str, backend: EventBackend) -> None:
    """Refuse to write values in plain mode into a ledger marked as written in crypto-shred
    mode (``modemark``): they would be stored unencrypted, out of crypto-shred's reach, by a
    process that was only started without the mode. Reads, retractions and the other events
    without a value go on."""
    if mode != "plain":
        return
    mark = backend.recorded_forget_mode()
    if mark is not None and mark.mode == CRYPTO_SHRED:
        where = f" (its key store: {mark.key_store})" if mark.key_store else ""
        raise LedgerError(
            f"{backend.location} is written in crypto-shred mode{where}: open it in that mode "
            '(forget_mode="crypto-shred", on the command line --forget-mode crypto-shred) with '
            "that key store to write values; in plain mode they would be stored unencrypted",
            code="crypto_shred",
        )
    if mark is None and sealed_unmarked(backend):
        raise LedgerError(
            f"{backend.location} holds values sealed in crypto-shred mode but records no mode "
            "(written by a version before the mark): open it once in that mode with its key "
            'store (forget_mode="crypto-shred", key_store=; on the command line --forget-mode '
            "crypto-shred --key-store ...), which records it, to write values; in plain mode "
            "they would be stored unencrypted",
            code="crypto_shred",
        )


def sealed_unmarked(backend: EventBackend) -> bool:
    """Whether a ledger that records no mode was written in crypto-shred mode: its newest value
    (the last assert with one, among the ``LOOK_BACK`` newest events) is an envelope. A version
    before the mark (2026-12-06) recorded nothing, and the key store beside a file ledger
    (``SidecarKeys``) tells only of the default one: with a key store elsewhere (another
    volume, as docs/forget.md advises) or on PostgreSQL the ledger read as plain, and a plain
    writer stored values unencrypted beside the sealed ones. A value of the envelope's exact
    shape is taken for one, as ``check_plain_forget`` takes it. Read once per backend object (a
    few events at the end; the answer is kept)."""
    try:
        return _SEALED[backend]
    except (KeyError, TypeError):
        pass
    last = backend.last_event()  # usually an assert with a value: nothing more is read
    newest: Any = iter(() if last is None else (last,))
    if last is not None and (not isinstance(last, AssertEvent) or last.fact.value is None):
        newest = backend.events_newest_first() or newest  # None: cannot read backwards cheaply
    sealed = False
    for event in islice(newest, LOOK_BACK):
        if isinstance(event, AssertEvent) and event.fact.value is not None:
            sealed = kid_of(event.fact.value) is not None
            break
    with suppress(TypeError):  # an object without weak references is asked again
        _SEALED[backend] = sealed
    return sealed

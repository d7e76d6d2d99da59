"""The forget mode a ledger records with its events, so that every opener knows it.

A ledger written in crypto-shred mode must not take plaintext values from a process that was
only started without the mode (a script, a second server, an operator's shell): those values
would sit unencrypted beside the sealed ones, out of crypto-shred's reach. The mode is a
property of the ledger, not of one process, so a crypto-shred opener records it where every
later opener reads it, and a plain-mode opener refuses to write values (``shred``):

* a JSONL ledger: a sidecar file ``<ledger>.mode`` (``ModeFile``); the original reads only the
  ledger file;
* a SQL ledger: a table ``<events table>_settings`` beside its events, which the original,
  reading only the events table, ignores;
* older file ledgers, written before the mark existed: their default key store beside them
  (``<ledger>.keys``, ``SidecarKeys``) says the same.

The mark is one small JSON object: the mode, and where its key store was (the display form,
which never holds a password), so the refusal can say what to open the ledger with. A plain
ledger records nothing: the absence of a mark means plain.
"""

from __future__ import annotations

import json
import os
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_custody_state.ledger.backend import EventBackendError

CRYPTO_SHRED = "crypto-shred"


@dataclass(frozen=True)
class ModeMark:
    """What a ledger records of its forget mode: ``mode`` ("crypto-shred") and the display
    location of the key store its writer used (None when not known)."""

    mode: str
    key_store: str | None = None

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
    """For an event backend whose events are one file (``path``): the mark in ``<path>.mode``,
    written once, atomically (a temporary file renamed into place, then the folder synced)."""

    path: Path

    def _mode_path(self) -> str:
        return f"{self.path}.mode"

    def recorded_forget_mode(self) -> ModeMark | None:
        where = self._mode_path()
        try:
            with open(where, encoding="utf-8") as handle:
                text = handle.read()
        except FileNotFoundError:
            return super().recorded_forget_mode()  # type: ignore[misc, no-any-return]
        except OSError as exc:
            raise EventBackendError(f"{where}: cannot read the forget-mode mark: {exc}") from None
        try:
            data = json.loads(text)
        except ValueError:
            data = text
        return ModeMark.from_mapping(data, where)

    def record_forget_mode(self, mark: ModeMark) -> None:
        where = self._mode_path()
        temporary = f"{where}.{os.getpid()}.tmp"
        try:
            with open(temporary, "w", encoding="utf-8") as handle:
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

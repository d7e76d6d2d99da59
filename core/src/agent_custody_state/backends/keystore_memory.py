"""The in-memory key store: the key store of the ``memory:`` backend (and of tests).

Nothing survives ``close()``, like the backend it serves.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping

from agent_custody_state.ledger.keystore import KeyStore, KeyStoreError


class MemoryKeyStore(KeyStore):
    """Keys and intents in two dictionaries, guarded by a lock."""

    kind = "memory"

    def __init__(self, location: str = "memory:") -> None:
        self.location = location
        self._keys: dict[str, bytes] = {}
        self._doomed: dict[str, str] = {}
        self._buried: dict[str, list[str]] = {}  # the erasure log, in memory like the keys
        self._lock = threading.Lock()

    def put(self, keys: Mapping[str, bytes]) -> None:
        with self._lock:
            clash = sorted(set(keys) & set(self._keys))
            if clash:
                raise KeyStoreError(f"key store {self.location}: key {clash[0]} exists already")
            self._keys.update(keys)

    def get(self, kids: Collection[str]) -> dict[str, bytes]:
        with self._lock:
            return {kid: self._keys[kid] for kid in kids if kid in self._keys}

    def destroy(self, kids: Collection[str]) -> None:
        with self._lock:
            for kid in kids:
                self._keys.pop(kid, None)
                self._doomed.pop(kid, None)

    def doom(self, intents: Mapping[str, str]) -> None:
        with self._lock:
            self._doomed.update(intents)
            for kid, fact_id in intents.items():
                if kid not in (logged := self._buried.setdefault(fact_id, [])):
                    logged.append(kid)

    def spare(self, kids: Collection[str]) -> None:
        with self._lock:
            for kid in kids:
                self._doomed.pop(kid, None)

    def doomed(self) -> dict[str, str]:
        with self._lock:
            return dict(self._doomed)

    def buried(self) -> dict[str, list[str]]:
        with self._lock:
            return {fact_id: list(kids) for fact_id, kids in self._buried.items()}

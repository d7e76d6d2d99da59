"""The key store of crypto-shred mode: the data keys, kept apart from the events they unlock.

In crypto-shred mode (``Ledger(..., forget_mode="crypto-shred")``, see ``shred``) every value is
encrypted with a key of its own before it reaches the event backend, and that key lives here,
in a different file or database than the events. Forgetting a fact destroys its key, so every
copy of the events ever taken (a file copy, a ``pg_dump``, WAL, a replica) holds only
ciphertext that nothing can open any more.

The interface is small on purpose: keys are written (``put``), read (``get``) and destroyed
(``destroy``). Three more methods make a destruction survive a crash at any point: before a
forget commits, the key is *doomed* (an intent recorded durably beside the keys); after the
forget has committed it is destroyed; the intent is dropped (``spare``) if the forget did not
happen. Whoever opens the ledger next finishes what a crash interrupted (``shred.recover``):
a doomed key whose fact is forgotten is destroyed, any other doomed key is spared.

An event backend says which key store goes with it (``EventBackend.keystore``): a sidecar file
for file ledgers, a separate database for PostgreSQL; a plugin's backend returns its own.
"""

from __future__ import annotations

import abc
from collections.abc import Collection, Mapping
from typing import Any

from agent_custody_state.ledger.backend import EventBackendError

#: Bytes in a data key (AES-256).
KEY_BYTES = 32


class KeyStoreError(EventBackendError):
    """The key store failed (I/O, lock, a file that is not a key store); names the location."""


class KeyStore(abc.ABC):
    """Where crypto-shred mode keeps data keys: key id (a string) -> 32 random bytes.

    Every write is durable when the method returns (fsync, ``COMMIT``): a key must be on disk
    before the event encrypted with it is, and gone before a forget is reported complete.
    Several processes may use one key store at once; each method is atomic on its own.
    """

    #: ``"file"``, ``"memory"``, ``"postgres"`` or a plugin's name
    kind: str = ""
    #: display location; never contains a password
    location: str = ""

    @abc.abstractmethod
    def put(self, keys: Mapping[str, bytes]) -> None:
        """Store new keys (fresh ids), all or none, durably before returning."""

    @abc.abstractmethod
    def get(self, kids: Collection[str]) -> dict[str, bytes]:
        """The keys among ``kids`` that exist (a destroyed or unknown id is simply absent)."""

    @abc.abstractmethod
    def destroy(self, kids: Collection[str]) -> None:
        """Delete these keys and any intent on them, durably, leaving no copy of a key in the
        store's files as far as the engine allows (``compact`` finishes what it defers)."""

    @abc.abstractmethod
    def doom(self, intents: Mapping[str, str]) -> None:
        """Record durably that each key (id -> the fact id it encrypts) is about to be destroyed
        because its fact is being forgotten."""

    @abc.abstractmethod
    def spare(self, kids: Collection[str]) -> None:
        """Drop the intents on these keys (their forget did not happen); the keys stay."""

    @abc.abstractmethod
    def doomed(self) -> dict[str, str]:
        """Every recorded intent: key id -> fact id."""

    def local_files(self) -> list[str] | None:
        """The files on this machine holding the keys (``EventBackend.local_files``); None:
        not scannable."""
        return None

    def compact(self) -> None:  # noqa: B027 - optional hook
        """Erase what ``destroy`` left for later (dead row versions); run after forgets."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release files and connections."""

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "location": self.location}

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

A key store restored from a backup taken before a forget holds the destroyed key again, and the
ledger does not name it (the forgotten assert's value is null). So a key store may keep an
*erasure log* beside the ledger (``buried``): every doom appends the key ids and their fact
first (``append_erasures``; the file key store of a file ledger: ``<ledger>.shredded``). It
travels with the ledger's backups, not the key store's, and lists the keys that must not exist
once their fact is forgotten (``shredreads.restored_keys``: ``verify``, ``repair``, ``certificate
reapply``).
"""

from __future__ import annotations

import abc
import errno
import json
import os
import stat
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from agent_custody_state import fastjson
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

    def buried(self) -> dict[str, list[str]]:
        """Fact id -> the key ids a forget of it doomed, from the erasure log kept beside the
        ledger; {} where none is kept (a key store given as an object, PostgreSQL's)."""
        return {}

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


def append_erasures(path: Path, intents: Mapping[str, str], location: str) -> None:
    """Append to the erasure log ``path`` (created 0600) the key ids of ``intents`` (key id ->
    fact id), one JSON line per fact, durably. Each write starts with a newline, so a line a
    crash tore costs only itself (its forget had not committed: the doom comes first)."""
    by_fact: dict[str, list[str]] = {}
    for kid, fact_id in intents.items():
        by_fact.setdefault(fact_id, []).append(kid)
    data = "".join(
        "\n" + json.dumps({"factId": f, "keyIds": sorted(k)}, separators=(",", ":"))
        for f, k in by_fact.items()
    ).encode("utf-8")
    try:
        new = not path.exists()
        # O_NONBLOCK: a FIFO there would block this open (inside the forget's write section,
        # every writer waiting for good); ``_regular`` refuses it and any other non-file.
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o600)
        try:
            _regular(fd)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        if new:
            folder = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)
    except OSError as exc:
        why = "not a regular file" if exc.errno == errno.ENXIO else exc.strerror or exc  # FIFO
        raise KeyStoreError(
            f"key store {location}: the erasure log {path} cannot be written "
            f"({why}); nothing was forgotten"
        ) from None


def _regular(fd: int) -> None:
    """Refuse (``OSError``) a descriptor that is not a regular file: a FIFO or a device named
    ``<ledger>.shredded`` (a link to ``/dev/zero`` was read until ``MemoryError``)."""
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise OSError(errno.EINVAL, "not a regular file")


def read_erasures(path: Path) -> dict[str, list[str]]:
    """The erasure log ``path``: fact id -> key ids ({} when there is none). A line that does
    not parse (torn by a crash) is skipped."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO: refused, not waited on
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise KeyStoreError(f"erasure log {path}: {exc.strerror or exc}") from None
    try:
        _regular(fd)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read()
    except OSError as exc:
        raise KeyStoreError(f"erasure log {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    # Each fact's key ids as an ordered set: a list searched per id took quadratic time (a
    # 1 MB line naming 40,000 ids: 7 s; a few MB stalled ``verify`` and ``repair`` for minutes).
    out: dict[str, dict[str, None]] = {}
    for line in data.splitlines():
        try:
            record = fastjson.loads(line) if line.strip() else None
        except (ValueError, RecursionError):  # nested too deep: damaged or forged, skipped too
            continue
        if not isinstance(record, dict) or not isinstance(fact_id := record.get("factId"), str):
            continue
        kids = record.get("keyIds")
        known = out.setdefault(fact_id, {})
        for kid in kids if isinstance(kids, list) else ():
            if isinstance(kid, str):
                known[kid] = None
    return {fact_id: list(kids) for fact_id, kids in out.items()}

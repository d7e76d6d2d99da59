"""Crypto-shred mode: values encrypted before they are stored, forget destroys the key.

``Ledger(location, forget_mode="crypto-shred")`` puts a ``ShreddingBackend`` between the ledger
and its event backend. It seals every asserted value into an envelope (``envelope``) with a data
key of its own, taken from the key store (``keystore``), and opens envelopes again on every read,
so the ledger, its rules, its digests and its callers see plaintext exactly as in plain mode.

The key hierarchy is one random AES-256 key per fact (decisions.md says why not per subject):

* **assert**: keys are created ahead, in blocks (``keypool``), each block durable in the key
  store before the transaction whose values it encrypts commits: the key of an acknowledged
  fact is always on disk, and a durable append pays no key-store write of its own. A key is
  handed out once; one a crash left unused encrypts nothing and is harmless;
* **forget**: inside the forget's transaction the key is *doomed* (an intent, durable), the
  backend rewrites the assert (value null, as in plain mode) and records the forget; after the
  commit the key is destroyed. A crash in between is settled by ``recover`` (``shredrecover``)
  at the next open: a doomed key whose fact is forgotten is destroyed, any other is spared.
  ``recover`` runs inside the backend's write section, so it never judges a forget another
  process has not finished;
* **read**: the keys of a result are fetched in one ``get`` and the envelopes opened; a value
  whose key is gone (an old copy of the events restored after the forget) reads as null.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import AbstractContextManager, suppress
from typing import Any, TypeVar

from agent_custody_state import fastjson
from agent_custody_state.ledger import forks
from agent_custody_state.ledger.backend import EventBackend, EventBackendError
from agent_custody_state.ledger.chain import ChainHead
from agent_custody_state.ledger.checkpoints import CheckpointLog
from agent_custody_state.ledger.envelope import (
    cipher_for,
    kid_of,
    plaintext,
    seal,
    spliced_line,
    with_value,
)
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.keypool import KeyPool
from agent_custody_state.ledger.keystore import KeyStore, KeyStoreError
from agent_custody_state.ledger.locking import section
from agent_custody_state.ledger.model import AssertEvent, Event, ForgetEvent, Forgotten
from agent_custody_state.ledger.modemark import CRYPTO_SHRED, ModeMark
from agent_custody_state.ledger.shredreads import ShreddedReads, ValueOpener
from agent_custody_state.ledger.shredrecover import doomed_keys_settled, restored_keys_destroyed

log = logging.getLogger(__name__)

T = TypeVar("T")


def _relined(event: AssertEvent, boxed: AssertEvent, plain: bytes) -> AssertEvent:
    """``boxed`` (``event`` with its value, whose wire JSON is ``plain``, sealed) with its line,
    when ``event`` came with one: sealing vouched for every other field then (``plainseal``).
    The envelope is spliced into ``event``'s line in the value's place
    (``envelope.spliced_line``), else the sealed event is encoded by orjson without the
    exactness checks (an envelope is four ASCII strings, written alike by orjson and the
    reference encoder; ``test_shred.py`` and ``test_shred_splice.py`` compare both with it).
    Without a line the backend encodes it."""
    if event.line is not None:
        line = spliced_line(event.line, plain, boxed.fact.value)
        if line is None:
            encoded = fastjson.ordered_unchecked(boxed.to_dict())
            line = None if encoded is None else encoded.decode("utf-8")
        if line is not None:
            object.__setattr__(boxed, "line", line)
    return boxed


def shredding(
    backend: EventBackend, key_store: str | KeyStore | None, *, mark: bool = True
) -> ShreddingBackend:
    """``backend`` in crypto-shred mode, with ``key_store`` (a location, a key store, or None
    for the backend's default), marked so (``modemark``) for every later opener unless
    ``mark`` is False (a command that only reads: it records nothing, and its caller opens
    only a key store that exists). The backend is closed if the key store cannot be opened. A
    ``KeyStore`` object passed in stays the caller's: closing the ledger does not close it."""
    if isinstance(backend, ShreddingBackend):
        return backend
    owned = not isinstance(key_store, KeyStore)
    keys: KeyStore | None = None
    try:
        keys = key_store if isinstance(key_store, KeyStore) else backend.keystore(key_store)
        shredder = ShreddingBackend(backend, keys, owns_keys=owned)
    except BaseException:
        with suppress(Exception):
            if keys is not None and owned:
                keys.close()
        with suppress(Exception):
            backend.close()
        raise
    if mark:
        _mark(backend, keys)
    return shredder


def _mark(backend: EventBackend, keys: KeyStore) -> None:
    """Record crypto-shred mode with ``backend`` unless it is recorded already. A reader that
    may not write the mark (a read-only role, a read-only folder) goes on, with a warning."""
    try:
        recorded = backend.recorded_forget_mode()
        if recorded is None or recorded.inferred:
            backend.record_forget_mode(ModeMark(CRYPTO_SHRED, keys.location))
    except EventBackendError as exc:
        log.warning("%s: crypto-shred mode is not recorded with the ledger: %s", backend, exc)


def value_opener(keys: KeyStore) -> ValueOpener:
    """What ``verify_lines(open_value=...)`` needs: envelopes opened, and keys of forgotten facts
    found, with ``keys`` (``shredreads.ValueOpener``)."""
    return ValueOpener(keys)


class _ShredSection:
    """``ShreddingBackend``'s write section: the inner backend's, under the shredding backend's
    own lock, and after the outermost one the doomed keys settled (destroyed if it committed).
    A class rather than a generator: every append opens one, and this costs a third."""

    __slots__ = ("_backend", "_inner", "_keys", "_outermost")

    def __init__(self, backend: ShreddingBackend, keys: Collection[str] | None) -> None:
        self._backend, self._keys = backend, keys
        self._outermost = False
        self._inner: AbstractContextManager[None] | None = None

    def __enter__(self) -> None:
        backend = self._backend
        backend._lock.acquire()
        self._outermost = backend._depth == 0
        backend._depth += 1
        try:
            self._inner = section(backend.inner, self._keys)
            self._inner.__enter__()
        except BaseException:
            try:
                backend._leave(self._outermost, committed=False)
            finally:
                backend._lock.release()
            raise

    def __exit__(self, kind: Any, error: Any, trace: Any) -> bool | None:
        backend = self._backend
        committed = False
        try:
            assert self._inner is not None
            suppressed = self._inner.__exit__(kind, error, trace)
            committed = kind is None or bool(suppressed)
            return suppressed
        finally:
            try:
                backend._leave(self._outermost, committed)
            finally:
                backend._lock.release()


class ShreddingBackend(ShreddedReads, EventBackend):
    """An event backend in crypto-shred mode: seals on append, opens on read, shreds on forget.

    Every other question goes to ``inner`` unchanged; its declared traits are its own.
    """

    def __init__(self, inner: EventBackend, keys: KeyStore, *, owns_keys: bool = True) -> None:
        self.inner = inner
        self.keys = keys
        self._owns_keys = owns_keys
        self.kind = inner.kind
        self.location = inner.location
        for trait in ("min_batch", "blocking", "shared", "locks_keys", "read_only"):
            setattr(self, trait, getattr(inner, trait))
        self._pool = KeyPool(keys)
        self._after_fork()  # its lock and section state; again in a forked child (``forks``)
        forks.watch(self)
        if any(done.startswith("destroyed") for done in self.recover()):
            self._compact_keys()  # the keys a crash left doomed: their rows erased now

    def _after_fork(self) -> None:
        self._lock, self._depth = threading.RLock(), 0  # a parent thread's section is not ours
        self._doomed: list[str] = []  # doomed in the current write section

    def _compact_keys(self) -> None:
        """Compact the key store after the open destroyed keys a crash left doomed (PostgreSQL's
        ``VACUUM FULL``); a failure is a warning, the erasure kept pending for the next one."""
        try:
            self.keys.compact()
        except Exception as exc:
            log.warning("%s: destroyed keys not compacted yet at open (%s)", self, exc)

    # -- writing -----------------------------------------------------------------------------

    def transaction(self, keys: Collection[str] | None = None) -> AbstractContextManager[None]:
        return _ShredSection(self, keys)

    def _leave(self, outermost: bool, committed: bool) -> None:
        """A section ends (``_ShredSection``): after the outermost, settle its doomed keys."""
        self._depth -= 1
        if outermost:
            doomed, self._doomed = self._doomed, []
            if doomed:
                self._settle(doomed, committed)

    def _settle(self, kids: list[str], committed: bool) -> None:
        """After the outermost section: destroy the keys of the forgets it committed. After a
        failed section the keys are judged by ``recover`` (a commit whose answer was lost may
        have happened). Whatever cannot be done now stays doomed for the next open."""
        try:
            if committed:
                self.keys.destroy(kids)
            else:
                self.recover()
        except Exception:
            log.exception("%s: keys %s not settled yet; the next open settles them", self, kids)

    def ordered(self) -> None:
        self.inner.ordered()

    def append(self, events: Sequence[Event]) -> None:
        places = [
            i
            for i, e in enumerate(events)
            if isinstance(e, AssertEvent) and e.fact.forgotten is None
        ]
        if not places:
            self.inner.append(events)
            return
        sealed = list(events)
        keys, durable = self._pool.take(len(places))
        for i, k in zip(places, keys, strict=True):
            event = events[i]
            assert isinstance(event, AssertEvent)
            # A line on the event means sealing walked its value already (``plainseal``).
            plain = plaintext(event.fact.value, vouched=event.line is not None)
            if k.cipher is None:  # kept on the key: its block's thread then skips it (keypool)
                k.cipher = cipher_for(k.key)
            box = seal(
                plain,
                fact_id=event.fact_id,
                kid=k.kid,
                key=k.key,
                nonce=k.nonce,
                cipher=k.cipher,
                iv=k.iv,
            )
            sealed[i] = _relined(event, with_value(event, box), plain)
        self.inner.append(sealed)
        durable()  # the keys reach the disk before the events can: before the commit

    def forget(self, fact_id: str, forgotten: Forgotten, event: ForgetEvent) -> None:
        kids = [
            kid
            for e in self.inner.events_for([fact_id])
            if isinstance(e, AssertEvent) and (kid := kid_of(e.fact.value)) is not None
        ]
        if kids and forgotten.digest_kind != "none" and len(self.keys.get(kids)) < len(set(kids)):
            raise LedgerError(
                f"fact {fact_id}: its key is gone from {self.keys.location}, so its value "
                "cannot be read and no digest can be computed; forget it with "
                "keep_digest=False",
                code="key_missing",
            )
        if kids:
            self.keys.doom(dict.fromkeys(kids, fact_id))
            self._doomed += kids
        self.inner.forget(fact_id, forgotten, event)

    def recover(self) -> list[str]:
        """Settle the keys a crash (or a failed section) left doomed; returns what was done
        (``shredrecover.doomed_keys_settled``, which says how)."""
        return doomed_keys_settled(self.inner, self.keys)

    def destroy_restored_keys(self, *, dry_run: bool = False) -> dict[str, list[str]]:
        """Destroy the data keys the key store holds again of facts the ledger records forgotten
        (``shredrecover.restored_keys_destroyed``); returns them by fact id. For ``repair`` and
        ``certificate reapply``: it reads the whole erasure log, so no open does it."""
        return restored_keys_destroyed(self.inner, self.keys, dry_run=dry_run)

    def chain_head(self) -> ChainHead:
        """The inner backend's: the chain record is stored beside the sealed value and the leaf
        leaves the value out, so no envelope is opened (nor its key fetched) per append."""
        return self.inner.chain_head()

    def stored_events(self) -> Iterator[str | bytes]:
        return self.inner.stored_events()  # as stored: sealed values, what verify must see

    def index_problems(self) -> list[tuple[int, str]]:
        return self.inner.index_problems()

    def checkpoint_log(self) -> CheckpointLog | None:
        return self.inner.checkpoint_log()

    # -- housekeeping ------------------------------------------------------------------------

    def refresh(self) -> None:
        self.inner.refresh()

    def bulk_load(self) -> AbstractContextManager[None]:
        return self.inner.bulk_load()

    def reading(self) -> AbstractContextManager[None]:
        return self.inner.reading()

    def consistent(self, read: Callable[[], T]) -> T:
        return self.inner.consistent(read)

    def compact(self) -> None:
        try:
            self.recover()
        except EventBackendError as exc:
            raise KeyStoreError(
                f"{self.keys.location}: the key of a forgotten fact is not destroyed yet "
                f"({exc}); it stays doomed, and the next open or compact destroys it"
            ) from exc
        self.inner.compact()
        self.keys.compact()

    def repair(self) -> list[str] | None:
        inner = self.inner.repair()
        done = self.recover()
        if restored := self.destroy_restored_keys():
            done.append(f"destroyed again the data keys of {len(restored)} forgotten fact(s)")
        return None if inner is None and not done else [*(inner or []), *done]

    def remember_head(self, event_id: str, head: ChainHead) -> None:
        self.inner.remember_head(event_id, head)

    def recorded_forget_mode(self) -> ModeMark | None:
        return self.inner.recorded_forget_mode()

    def record_forget_mode(self, mark: ModeMark) -> None:
        self.inner.record_forget_mode(mark)

    def keystore(self, location: str | None = None) -> KeyStore:
        return self.keys

    def local_files(self) -> list[str] | None:
        """The events' files only: the key store's are its own (``KeyStore.local_files``)."""
        return self.inner.local_files()

    def describe(self) -> dict[str, Any]:
        return {
            **self.inner.describe(),
            "forgetMode": "crypto-shred",
            "keyStore": self.keys.describe(),
        }

    def close(self) -> None:
        try:
            with suppress(Exception):  # unused keys left behind are harmless
                self._pool.release()
            if self._owns_keys:
                self.keys.close()
        finally:
            self.inner.close()

    def __repr__(self) -> str:
        return f"ShreddingBackend({self.location}, keys={self.keys.location})"

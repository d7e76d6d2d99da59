"""The EventBackend interface: what the ledger asks of a place that keeps events.

The ledger never loads every event to answer a question. It asks the store a handful of narrow,
indexable questions (the assert of a fact, the events citing some facts, the asserts matching a
filter up to a transaction time, ...), so a SQL backend answers each with one indexed query and a
ten-million-event ledger opens in constant time. Writes happen inside ``transaction()``, an
exclusive section across processes: the ledger re-reads what it needs, validates, and appends,
and the store commits all of it durably, or none of it, when the section ends.

Times passed to the query methods are normalised wire strings (see ``timeutil``).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from agent_custody_state.ledger.chain import ChainHead, head_after
from agent_custody_state.ledger.checkpoints import CheckpointLog
from agent_custody_state.ledger.errors import EventBackendError as EventBackendError
from agent_custody_state.ledger.model import AssertEvent, Event, Fact, ForgetEvent, Forgotten

if TYPE_CHECKING:
    from agent_custody_state.ledger.keystore import KeyStore
    from agent_custody_state.ledger.modemark import ModeMark
    from agent_custody_state.ledger.stored import StoredChunk


T = TypeVar("T")

#: The fact keys ``EventBackend.key_values`` lists (wire names).
KeyName = Literal["subject", "predicate", "space", "factId"]
KEY_NAMES: tuple[KeyName, ...] = ("subject", "predicate", "space", "factId")


def key_of(event: AssertEvent, key: KeyName) -> str:
    """The value of one of the fact's keys (``KeyName``) on an assert."""
    fact = event.fact
    return fact.fact_id if key == "factId" else str(getattr(fact, key))


class EventBackend(abc.ABC):
    """Abstract event store; backends subclass it and register through ``acs_register_event_backends``."""

    #: backend name: ``"jsonl"``, ``"sqlite"``, ``"postgres"``, ``"memory"`` or a plugin's name
    kind: str = ""
    #: display location; never contains a password
    location: str = ""

    # Behaviour the layers above adapt to, declared by the backend itself (never looked up by
    # its name), so a third-party backend gets the same treatment as a builtin one.

    #: The smallest group of concurrent asserts worth one multi-event transaction (the server's
    #: group commit). A backend whose multi-event commit costs more than a single-event one says
    #: so: JSONL journals a multi-event append (about four fsyncs), so it declares 4.
    min_batch: ClassVar[int] = 2
    #: Whether calls may wait on disk or network. A backend that never does (in-memory) is
    #: called inline on the server's event loop instead of on the ledger thread.
    blocking: ClassVar[bool] = True
    #: Whether several processes may open the same location and see one ledger (the
    #: multi-process conformance classes apply only then).
    shared: ClassVar[bool] = True
    #: Whether ``transaction`` takes ``keys=`` (``locking``): the ledger then names the keys a
    #: section touches, and sections with disjoint keys need not wait for each other. A backend
    #: that serialises every writer anyway (a file lock) leaves it False and is called as before.
    locks_keys: ClassVar[bool] = False
    #: Whether the events a read returns are the objects the backend keeps (an in-memory
    #: index), rather than built for the read: the ledger then hands out copies of what a
    #: caller may change (``model.handed``), so no caller rewrites the ledger's past in memory.
    keeps_objects: ClassVar[bool] = False
    #: Whether this backend was opened read-only (``read_only=True``, docs/backends.md): it
    #: creates no file, table or sidecar and refuses every write section.
    read_only: bool = False
    #: The last head ``chain_head`` computed over events without a chain record, with the id
    #: of the event it follows (an instance attribute once set).
    _computed_head: tuple[str, ChainHead] | None = None

    # -- writing -----------------------------------------------------------------------------

    @abc.abstractmethod
    def transaction(self) -> AbstractContextManager[None]:
        """Exclusive write section (across threads and processes).

        A backend declaring ``locks_keys`` takes ``transaction(keys=...)``: the keys
        (``locking``) of everything the section will validate against or change, or None for an
        exclusive section. It need only exclude sections sharing a key (and exclusive ones);
        appends must still reach the store in one total order (``seq`` order is commit order).
        Inside it, reads see every event committed by anyone plus those appended in this section;
        at a normal exit the appended events are durable (fsync / commit) before it returns; on an
        exception nothing appended in the section remains. Sections may nest (inner is a no-op).
        """

    def ordered(self) -> None:  # noqa: B027 - optional hook
        """Enter the section's ordered phase: from here to the commit, nothing another section
        appends may come between this section's head read and its appends. Only inside
        ``transaction()``; the ledger calls it after validating and before it stamps the
        transaction time, seals and appends (so time and the chain follow append order). A
        backend whose sections exclude each other anyway (a file lock) does nothing; one
        locking keys takes its order lock here, held to the commit, so the reads and checks
        before it overlap with other sections'."""

    @abc.abstractmethod
    def append(self, events: Sequence[Event]) -> None:
        """Append events in order; only inside ``transaction()``."""

    @abc.abstractmethod
    def forget(self, fact_id: str, forgotten: Forgotten, event: ForgetEvent) -> None:
        """Atomically rewrite the fact's assert (value null, ``forgotten`` set) and append ``event``.

        Only inside ``transaction()``. After the section ends no byte of the old value remains in
        the files the store manages, as far as the engine allows (``compact`` finishes the job);
        an engine's own log (PostgreSQL's WAL) may keep it longer: docs/forget.md says where.
        """

    # -- reading -----------------------------------------------------------------------------

    @abc.abstractmethod
    def get_assert(self, fact_id: str) -> AssertEvent | None:
        """The assert that introduced ``fact_id``, or None."""

    @abc.abstractmethod
    def events_for(self, fact_ids: Collection[str]) -> list[Event]:
        """Every event whose fact id is in ``fact_ids`` (asserts included), in append order."""

    @abc.abstractmethod
    def superseders(self, fact_ids: Collection[str]) -> list[AssertEvent]:
        """Every assert whose ``supersedes`` is in ``fact_ids``, in append order."""

    def events_around(self, fact_ids: Collection[str]) -> list[Event]:
        """Every event citing one of ``fact_ids`` or one of their superseders, in append order:
        ``events_for`` of the ids and of ``superseders(fact_ids)``'s (the superseding asserts
        included), what the ledger needs to know the status of some facts and of what
        supersedes them. A SQL backend answers it with one query instead of two."""
        ids = dict.fromkeys(fact_ids)
        ids.update(dict.fromkeys(e.fact_id for e in self.superseders(fact_ids)))
        return self.events_for(list(ids))

    def events_along(self, fact_ids: Collection[str]) -> tuple[list[Event], bool]:
        """``events_around(fact_ids)``, and whether it also holds, through every superseder
        retracted or forgotten now, that superseder's own superseders and their events, down
        the chain: all an effective-superseder walk from these facts needs, in one question
        (``queries.walk_from``). Default: ``(events_around(fact_ids), False)``; the ledger then
        asks for each deeper level it needs."""
        return self.events_around(fact_ids), False

    def asserts_around(
        self,
        *,
        space: str | None = None,
        subject: str | None = None,
        predicate: str | None = None,
        tx_at: str | None = None,
    ) -> tuple[list[AssertEvent], list[Event]]:
        """``find_asserts`` with these filters, and ``events_around`` the facts it found.

        The as-of read in one question: a SQL backend answers a read by subject with one
        indexed query instead of two.
        """
        found = list(
            self.find_asserts(space=space, subject=subject, predicate=predicate, tx_at=tx_at)
        )
        return found, self.events_around([e.fact_id for e in found]) if found else []

    def asserts_for_as_of(
        self,
        *,
        space: str | None = None,
        subject: str | None = None,
        predicate: str | None = None,
        tx_at: str | None = None,
    ) -> tuple[list[AssertEvent], list[Event]]:
        """``asserts_around`` for an as-of read, which needs no legal-hold state (hold and
        release events may be left out) and may leave values sealed: the ledger opens those of
        the facts it returns (``open_values``). Default: ``asserts_around``."""
        return self.asserts_around(space=space, subject=subject, predicate=predicate, tx_at=tx_at)

    def open_values(self, facts: list[Fact]) -> list[Fact]:
        """``facts`` of ``asserts_for_as_of``'s answer with their values readable (as given)."""
        return facts

    @abc.abstractmethod
    def history(self, fact_id: str) -> list[Event]:
        """Events citing ``fact_id`` or superseding it, in append order."""

    @abc.abstractmethod
    def find_asserts(
        self,
        *,
        space: str | None = None,
        subject: str | None = None,
        predicate: str | None = None,
        tx_at: str | None = None,
        tx_before: str | None = None,
    ) -> Iterator[AssertEvent]:
        """Asserts matching the filters, in append order.

        ``tx_at``: only ``txTime <= tx_at``; ``tx_before``: only ``txTime < tx_before``.
        """

    @abc.abstractmethod
    def spaces(self) -> list[str]:
        """Distinct spaces of all asserts, sorted."""

    def key_values(self, key: KeyName, prefix: str = "", limit: int = 100) -> list[str]:
        """Distinct values of ``key`` (``subject``, ``predicate``, ``space`` or ``factId``) among
        asserts whose fact is not forgotten, starting with ``prefix``, in code-point order, at
        most ``limit`` of them (completions ask for one more than they show, to know if there
        are more). The default reads every assert: override it with an indexed read."""
        values = {
            key_of(event, key)
            for event in self.find_asserts()
            if event.fact.forgotten is None and key_of(event, key).startswith(prefix)
        }
        return sorted(values)[:limit]

    @abc.abstractmethod
    def count(self) -> int:
        """Number of events."""

    @abc.abstractmethod
    def iter_events(self) -> Iterator[Event]:
        """Every event in append order (streams; used by export)."""

    # -- the chain (``chain``, ``docs/proofs.md``) --------------------------------------------

    def first_event(self) -> Event | None:
        """The first event appended, or None (it names the ledger in checkpoints and
        certificates). The default takes the first of ``iter_events()``."""
        return next(iter(self.iter_events()), None)

    def last_event(self) -> Event | None:
        """The last event appended, or None; inside ``transaction()`` this section's appends
        count. The default reads every event: override it with one indexed read."""
        last = None
        for last in self.iter_events():  # noqa: B007 - the loop keeps the last one
            pass
        return last

    def last_tx_time(self) -> str | None:
        """``last_event()``'s transaction time (a writer locking keys raises its stamp to it);
        a wrapper whose events cost something to open answers it without opening one."""
        last = self.last_event()
        return None if last is None else last.tx_time

    def events_newest_first(self) -> Iterator[Event] | None:
        """Every event in reverse append order, read lazily from the end; None when the
        backend cannot read backwards cheaply (the default). With it, the chain head after
        events written without the chain is found by reading back to the last chain record
        instead of reading the whole ledger (``chain_head``)."""
        return None

    def chain_head(self) -> ChainHead:
        """Where the chain stands: the head recorded on ``last_event()``. Only when the last
        event carries no chain record (written by the TypeScript original, or with the chain
        off) are more events read: back to the last record (``events_newest_first``), or all
        of them when there is none (the genesis a ledger of the original's gets). A head so
        computed is remembered with its last event, so the next call reads only what came
        after it (or nothing)."""
        last = self.last_event()
        head = head_after(last, self.stored_events, self.events_newest_first, self._computed_head)
        if last is not None and not head.chained:
            self._computed_head = (last.event_id, head)
        return head

    def remember_head(self, event_id: str, head: ChainHead) -> None:
        """Take ``head``, the chain head after the event ``event_id`` computed elsewhere (the
        server's start-up, on a second instance: ``server.warmup``), as ``chain_head`` would
        remember its own; kept unless ``chain_head`` has computed one already."""
        if self._computed_head is None:
            self._computed_head = (event_id, head)

    def stored_events(self) -> Iterator[str | bytes]:
        """Every event as stored (its JSON text), in append order, without parsing it: what
        ``agent-custody-memory verify`` reads, so an event the backend could not parse is
        reported by position instead of failing the whole read. The default serialises
        ``iter_events()``; a backend that stores text returns it as it is."""
        for event in self.iter_events():
            yield event.to_json()

    def index_problems(self) -> list[tuple[int, str]]:
        """Events whose copy in the backend's own index (what reads look events up by) differs
        from the event as stored: ``(position, reason)``, positions counted from 1 in append
        order as ``verify`` counts them. The chain covers the stored events only, so ``verify``
        adds these, asking on a thread of its own while it reads ``stored_events`` (so this
        reads on a connection of its own). Default: none (a backend whose index is derived from
        the stored text, as JSONL's and memory's are, has nothing to add)."""
        return []

    def stored_chunks(self, size: int) -> Iterator[StoredChunk] | None:
        """``stored_events`` and ``index_problems`` in chunks of ``size`` events (the last may
        be shorter), up to the last event stored now, that ``verify``'s worker processes read
        themselves (``ledger.stored``). Default: None, the events are read in this process."""
        return None

    def local_files(self) -> list[str] | None:
        """The files on this machine that hold this ledger's events, for the byte scan of an
        erasure certificate (``ledger.bytescan``): the event files and every temporary, journal
        or write-ahead log of them the backend itself manages, with pages it caches written out
        first. Files that may not exist yet are fine (the scan skips them). Default: None, "not
        scannable" (the bytes live on another machine, in memory, or where only the backend
        knows); the certificate then says so instead of claiming a scan."""
        return None

    def checkpoint_log(self) -> CheckpointLog | None:
        """Where this ledger's signed checkpoints are kept by default, or None (a location
        must then be given: ``Ledger(..., checkpoints=PATH)``)."""
        return None

    # -- housekeeping -------------------------------------------------------------------------

    def reading(self) -> AbstractContextManager[None]:
        """A consistent snapshot for a read made of several questions (an as-of read may ask
        again past a retracted link): inside it, every answer reflects one moment, so a read can
        never mix states from before and after another process's write. Default: nothing (a
        backend that answers from one in-process index is consistent already)."""
        return nullcontext()

    def consistent(self, read: Callable[[], T]) -> T:
        """``read()`` (a read asking one or more questions) on one snapshot, as ``reading``.

        A backend may run ``read`` more than once (its result is then the last run's), so
        ``read`` must have no effect beyond its answer. PostgreSQL runs it first with no
        transaction: a read that asks one question (most as-of reads, every ``get`` of a fact
        with no chain) is one statement, one snapshot, one round trip; a second question
        abandons that run and the read runs again in a snapshot transaction. Default: within
        ``reading()``.
        """
        with self.reading():
            return read()

    def bulk_load(self) -> AbstractContextManager[None]:
        """Around ``Ledger.import_events`` into an empty ledger: a backend may leave its
        secondary indexes out while the rows go in and build them at the end, as bulk loaders
        do (SQLite: 1.2x the rows per second of the same inserts into an indexed table). When
        it exits, normally or by an error, the layout is complete again; a process that died
        inside leaves it to the next open (which creates what an index-less table lacks).
        Reads meanwhile stay correct, only slower. Default: nothing."""
        return nullcontext()

    def refresh(self) -> None:  # noqa: B027 - optional hook
        """Pick up events appended by other processes (stores that cache may need it)."""

    def compact(self) -> None:  # noqa: B027 - optional hook
        """Reclaim space and erase leftovers of forgotten values (WAL checkpoint, VACUUM)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release files, connections and locks."""

    def repair(self) -> list[str] | None:
        """Repair what a crash left (``agent-custody-memory repair``): a list of what was done,
        or None for a backend that repairs itself on open (SQL engines recover on their own)."""
        return None

    def recorded_forget_mode(self) -> ModeMark | None:
        """The forget mode recorded with this ledger (``modemark``), or None: none recorded, or
        the backend keeps no mark. A ledger opened in plain mode refuses to write values into
        one marked crypto-shred (``modemark.check_plain_values``), which asks at every write: a
        backend for which reading the mark costs a round trip may remember it for a moment."""
        return None

    def record_forget_mode(self, mark: ModeMark) -> None:  # noqa: B027 - optional hook
        """Record ``mark`` with this ledger, where every later opener reads it (called by a
        crypto-shred opener of a ledger that has none). Default: nothing is kept."""

    def keystore(self, location: str | None = None) -> KeyStore:
        """The key store for this ledger's data keys in crypto-shred mode (``ledger.keystore``).

        ``location`` is what the user gave (``key_store=``, ``--key-store``), or None for the
        backend's default: somewhere that is *not* copied with the events (a sidecar file, a
        separate database). A backend without crypto-shred support keeps this refusal; the
        caller may still pass a ``KeyStore`` object to the ledger.
        """
        raise EventBackendError(
            f"{self.location}: the {self.kind or type(self).__name__} backend has no key store "
            "for crypto-shred mode; pass a KeyStore object as key_store="
        )

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "location": self.location}

    def __enter__(self) -> EventBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

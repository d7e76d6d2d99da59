"""The outbox: store removals owed by a retract, forget or sweep, kept durably until done.

A retract, forget or sweep commits in the ledger first and then removes the fact from each store
holding it (``flows``, ``sweeping``). A process that dies between the two (a crash, ``kill -9``,
a power cut) would leave the stores' copies behind, with nothing recording that a removal is
still owed: for a forget, the erased value would stay in a vector store, served by recall. So:

- **before** the ledger change, the flow appends one entry per store holding the fact (fact id,
  store, the store's external id, ``retract``/``forget``, the time, the writer's pid) to the
  outbox and fsyncs it;
- **after** the stores' removal was tried and reported (verified, or named in ``stillHeld``),
  the flow settles the entries of the stores it asked (a ``settled`` line; no fsync: a settle
  lost in a crash only makes the next start repeat a removal, which every store accepts); an
  entry for a store not configured here (or moved, ``where``) stays owed (``owing``);
- **at the next start** (``serve``, ``sweep --config``) ``resume`` finishes what is owed:
  where the ledger shows the change committed it removes by external id and verifies, then
  settles; where it never committed, the entry is dropped (nothing is owed). An entry for a
  store not configured here, or whose removal fails again, stays and is logged; an entry whose
  writer is still running (another process's flow in flight) is left to it.

It also keeps the cleanups a failed write leaves owed (operation ``put``): a store's put raised,
and looking up or removing the copy it may have kept failed too (``orphans``). No external id
is known and no ledger change is involved: ``resume`` hands them to ``orphan_resume``.

An entry also keeps the store's ``where`` when it declared one: a removal finished from it at
a store that now writes elsewhere is refused and the entry stays owed (``where``).

A disk that refuses the outbox (full, a file size limit, no descriptor left): an owe is
refused whole, naming the file and the cause (``OutboxError``, an ``EventBackendError``), before
the ledger or any store changes, and leaves no half line and no new empty file; a settle that
cannot be written is logged and treated as a settle lost in a crash (``outbox_file``). So is a
file lock another process holds past ``lock_timeout`` seconds (``outbox_lock``): a JSONL
ledger's own ``lock_timeout`` when built from a path by ``Outbox.of``, else 60.

The outbox never holds a value (an erased one would otherwise stay on disk): a removal finished
from it after a forget is verified only by stores that declare their check needs no value
(``verify_without_value``); any other reports ``unverified``, never a false ``verified``. After
a retract the ledger still has the value and verification is the usual one.

Where it lives: ``<ledger>.outbox`` beside a file ledger (JSONL lines, 0600, created only when
a removal is first owed and removed again once nothing is owed), or the configured ``outbox``
path for a ledger at a URL. The original TypeScript implementation ignores the file; the
ledger's own files and rows are unchanged.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_custody_state.ledger.appending import failure
from agent_custody_state.ledger.files import FileNames
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.model import Fact
from agent_custody_state.lockwait import DEFAULT_LOCK_TIMEOUT
from agent_custody_state.lockwait import lock_timeout as bounded
from agent_custody_state.stores.base import verifies_without_value
from agent_custody_state.stores.outbox_file import (
    alive,
    append_lines,
    outbox_error,
    own_start,
    read_records,
)
from agent_custody_state.stores.outbox_lock import locked
from agent_custody_state.stores.owed import Operation as Operation
from agent_custody_state.stores.owed import Owed as Owed
from agent_custody_state.stores.owed import pending_of
from agent_custody_state.stores.storeset import RemovalReport, StoreSet
from agent_custody_state.stores.where import recorded, with_where

log = logging.getLogger(__name__)


#: The sidecar beside a file ledger: ``<ledger>.outbox``.
SUFFIX = ".outbox"


def outbox_path(ledger_location: str, configured: str | os.PathLike[str] | None) -> Path | None:
    """Where a ledger's outbox lives: ``configured`` if given, else ``<file>.outbox`` beside a
    file ledger itself, whatever spelling names it (``files.FileNames``: a symlink's outbox of
    an older version is found); None for a ledger at a URL (PostgreSQL, ``memory:``) with no
    path configured."""
    if configured is not None and str(configured):
        return Path(configured)
    if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", ledger_location):
        return None
    return FileNames.of(ledger_location).find(SUFFIX[1:], "outbox file", ledger_location)


class Outbox:
    """The owed removals in one JSONL file, shared by threads and processes (``flock``)."""

    def __init__(
        self, path: str | os.PathLike[str], *, lock_timeout: float | None = DEFAULT_LOCK_TIMEOUT
    ) -> None:
        self.path = Path(path)
        #: seconds a call waits for the file's lock another process holds (None: no bound)
        self.lock_timeout = bounded(lock_timeout)
        if not self.path.parent.is_dir():
            raise ValueError(
                f"outbox {self.path}: the folder {self.path.parent} does not exist; create it "
                "first (no folder is ever created)"
            )
        self._lock = threading.Lock()
        #: entries this object wrote and has not settled: flows in flight, never resumed
        self._inflight: set[str] = set()

    @classmethod
    def of(cls, outbox: Outbox | str | os.PathLike[str] | None, ledger: Ledger) -> Outbox | None:
        """``outbox`` as given (None, or an ``Outbox`` with its own bound), else the outbox at
        that path, its lock waited for as long as ``ledger``'s: a JSONL ledger's own
        ``lock_timeout`` (None: no bound), else the default."""
        from agent_custody_state.backends.jsonl import JsonlBackend

        if outbox is None or isinstance(outbox, Outbox):
            return outbox
        backend = getattr(ledger.backend, "inner", ledger.backend)  # crypto-shred wraps it
        if isinstance(backend, JsonlBackend):
            return cls(outbox, lock_timeout=backend.lock_timeout)
        return cls(outbox)

    @contextmanager
    def _open(self, create: bool) -> Iterator[int | None]:
        """The file, locked (``outbox_lock``); None when it does not exist and ``create`` is
        false."""
        with self._lock, locked(self.path, create, self.lock_timeout) as fd:
            yield fd

    def owe(self, facts: Iterable[Fact], operation: Operation, at: str) -> list[Owed]:
        """Record, durably (one fsync), a removal owed to each store each fact's ``external``
        names."""
        pid = os.getpid()
        owed = [
            Owed(
                uuid.uuid4().hex,
                fact.fact_id,
                name,
                ext,
                operation,
                at,
                pid,
                None,
                where.get(name),
                own_start(),
            )
            for fact in facts
            for where in (recorded(fact),)
            for name, ext in sorted((fact.external or {}).items())
        ]
        if owed:
            self._append([o.line() for o in owed], sync=True)
            with self._lock:
                self._inflight.update(o.entry for o in owed)
        return owed

    def owe_puts(self, fact: Fact, stores: Iterable[str], at: str) -> list[Owed]:
        """Record, durably, that ``stores`` may hold a copy a failed put of ``fact`` left
        (no external id is known: ``held_ids`` finds it). Not in flight: nothing in this
        process will retry it before ``resume``."""
        owed = [
            Owed(
                uuid.uuid4().hex,
                fact.fact_id,
                name,
                "",
                "put",
                at,
                pid,
                fact.space,
                where.get(name),
                own_start(),
            )
            for pid, where in ((os.getpid(), recorded(fact)),)
            for name in stores
        ]
        if owed:
            self._append([o.line() for o in owed], sync=True)
        return owed

    def settle(self, owed: Iterable[Owed]) -> None:
        """The removals are done (or reported): they are no longer owed."""
        entries = [o.entry for o in owed]
        if not entries:
            return
        try:  # settled, then not in flight, in one hold of the lock (``pending``'s ``flying``)
            with self._open(create=False) as fd:
                if fd is not None:
                    append_lines(fd, [{"settled": entries}], sync=False)
                    idle = not self._inflight.difference(entries)
                    if idle and not pending_of(read_records(fd)):
                        os.unlink(self.path)  # nothing owed: no file beside the ledger
                self._inflight.difference_update(entries)
        except OSError as exc:
            with self._lock:
                self._inflight.difference_update(entries)
            # As a settle lost in a crash (they are not fsynced): the change and the removals
            # are done, so the caller is not told they failed; the next start repeats them.
            after = (
                "they stay owed, and the next start repeats them (removing what is gone is fine)"
            )
            log.warning("%s", failure("settle owed removals in", self.path, exc, after))

    def leave(self, owed: Iterable[Owed]) -> None:
        """The flow is done with these entries but they stay owed (no store here can remove
        the copy): no longer in flight, so ``resume`` retries them."""
        with self._lock:
            self._inflight.difference_update(o.entry for o in owed)

    def pending(self, flying: set[str] | None = None) -> list[Owed]:
        """Every entry owed and not settled, in the order written; ``flying`` gets those this
        process's flows had in flight then, read under the same lock (``in_flight``)."""
        try:
            with self._open(create=False) as fd:
                if flying is not None:
                    flying.update(self._inflight)
                return [] if fd is None else pending_of(read_records(fd))
        except OSError as exc:
            raise outbox_error("read the outbox", self.path, exc, "nothing was changed") from exc

    def in_flight(self, owed: Owed, flying: set[str] | None = None) -> bool:
        """Whether a flow of this process (as ``flying`` read it, else now), or a process still
        running, wrote ``owed`` and has not settled it yet (``resume`` leaves these alone)."""
        with self._lock:
            if owed.entry in (self._inflight if flying is None else flying):
                return True
        return owed.pid != os.getpid() and alive(owed.pid, owed.started)

    def _append(self, lines: list[dict[str, Any]], *, sync: bool) -> None:
        """All or nothing (``outbox_file``); ``OutboxError`` naming the file and the cause."""
        try:
            with self._open(create=True) as fd:
                assert fd is not None
                try:
                    append_lines(fd, lines, sync=sync)
                except OSError:
                    with suppress(OSError):
                        if os.fstat(fd).st_size == 0:  # made for these lines: leave no file
                            os.unlink(self.path)
                    raise
        except OSError as exc:
            raise outbox_error(
                "record owed removals in", self.path, exc, "nothing was changed"
            ) from exc


@dataclass
class Resumed:
    """What ``resume`` did: removals finished (fact id -> report), entries dropped (the ledger
    change never committed) and entries left owed (store not configured here, removal failed
    again, or still in flight in another process), each with why."""

    finished: dict[str, RemovalReport] = field(default_factory=dict)
    dropped: list[Owed] = field(default_factory=list)
    left: dict[str, str] = field(default_factory=dict)  # entry id -> why

    def summary(self) -> str:
        """One line for an operator; empty when there was nothing to resume."""
        if not (self.finished or self.dropped or self.left):
            return ""
        unverified = sum(
            1 for r in self.finished.values() for v in r.verification.values() if v != "verified"
        )
        line = (
            f"outbox: finished the owed store removals of {len(self.finished)} facts "
            f"({unverified} removals not verified), dropped {len(self.dropped)} entries "
            "whose ledger change never committed"
        )
        if self.left:
            line = "warning: " + line + f"; {len(self.left)} removals still owed (see the log)"
        return line


Run = Callable[..., Awaitable[Any]]


def committed(ledger: Ledger, owed: Owed) -> tuple[bool, Fact | None]:
    """Whether the ledger change an entry was written for happened, and the fact as it is."""
    fact = ledger.get(owed.fact_id)
    if fact is None:
        return False, None
    if owed.operation == "forget":
        return fact.forgotten is not None, fact
    return ledger.is_retracted(owed.fact_id), fact


async def resume(outbox: Outbox, ledger: Ledger, stores: StoreSet, run: Run) -> Resumed:
    """Finish the removals owed: a crash's, an unconfigured store's (the module docstring)."""
    done = Resumed()
    by_fact: dict[str, list[Owed]] = {}
    flying: set[str] = set()  # read with the entries: a flow may settle one since
    for owed in await run(outbox.pending, flying):
        if owed.operation == "put":
            continue  # no ledger change to check: ``orphan_resume`` finishes these
        if outbox.in_flight(owed, flying):
            done.left[owed.entry] = f"in flight in process {owed.pid}"
            continue
        by_fact.setdefault(owed.fact_id, []).append(owed)
    for fact_id, entries in by_fact.items():
        # Decided per operation: a retract that committed after a forget that never did (or
        # the reverse) still owes its removal.
        states = {o.operation: await run(committed, ledger, o) for o in entries}
        never = [o for o in entries if not states[o.operation][0]]
        if never:
            log.info(
                "outbox: the %s of fact %s never committed in the ledger; nothing is owed",
                never[0].operation,
                fact_id,
                extra={"fact": fact_id},
            )
            done.dropped += never
            await run(outbox.settle, never)
        live = [o for o in entries if o not in never]
        fact = states[live[0].operation][1] if live else None
        if fact is not None:
            for batch in _rounds(live):
                await _finish(done, outbox, stores, run, fact, batch)
    return done


def _rounds(entries: list[Owed]) -> list[list[Owed]]:
    """The entries in rounds of at most one per store: a fact's removal names one id per store,
    and a fact may owe two copies in one store (an old copy whose removal failed, and a put-back
    made since); collapsed into one, the other copy was left and its entry settled."""
    rounds: list[list[Owed]] = []
    for owed in entries:
        free = next((r for r in rounds if all(o.store != owed.store for o in r)), None)
        if free is None:
            free = []
            rounds.append(free)
        free.append(owed)
    return rounds


async def _finish(
    done: Resumed, outbox: Outbox, stores: StoreSet, run: Run, fact: Fact, entries: list[Owed]
) -> None:
    here = [o for o in entries if stores.by_name(o.store) is not None]
    for o in entries:
        if o not in here:
            why = f"store {o.store} is not configured here; its copy (id {o.external_id}) is owed"
            log.error("outbox: fact %s: %s", fact.fact_id, why, extra={"fact": fact.fact_id})
            done.left[o.entry] = why
    if not here:
        return
    target = with_where(
        fact.with_(external={o.store: o.external_id for o in here}),
        {o.store: o.where for o in here if o.where},
    )
    # After a forget the ledger has no value: only a check that needs none can say "verified".
    erased = fact.forgotten is not None
    blind = [
        o.store for o in here if erased and not verifies_without_value(stores.by_name(o.store))
    ]
    report = await stores.remove_all(target, only=[o.store for o in here], blind=blind)
    done.finished[fact.fact_id] = _worst(done.finished.get(fact.fact_id), report)
    for name in blind:
        log.warning(
            "outbox: fact %s removed from %s after its forget; its check needs the erased "
            "value, so the removal is unverified",
            fact.fact_id,
            name,
            extra={"store": name, "fact": fact.fact_id},
        )
    for o in here:
        if o.store in report.still_held:
            done.left[o.entry] = f"removal failed again: {report.still_held[o.store]}"
    await run(outbox.settle, [o for o in here if o.entry not in done.left])
    log.warning(
        "outbox: finished the owed removal of fact %s (%s; left by a process that stopped, "
        "or that had the store not configured or moved): %s",
        fact.fact_id,
        entries[0].operation,
        ", ".join(f"{k}: {v}" for k, v in report.verification.items()),
        extra={"fact": fact.fact_id},
    )


def _worst(before: RemovalReport | None, report: RemovalReport) -> RemovalReport:
    """One fact's report over its rounds (``_rounds``). A later round's check saw the earlier
    removals, so it answers for the store, unless an earlier removal failed (that copy may
    still be there whatever a check by another id says)."""
    if before is None:
        return report
    for name, verification in report.verification.items():
        if before.verification.get(name) != "failed":
            before.verification[name] = verification
    before.removed_from += [n for n in report.removed_from if n not in before.removed_from]
    before.still_held.update(report.still_held)
    before.moved += [n for n in report.moved if n not in before.moved]
    return before

"""Verifying a ledger's chain in several processes, with exactly the sequential report.

The check of an event needs the state the verifier had after the event before it (``State``:
the running head, whether the chain started, a run of events without a record, an unreadable
event) and the asserts marked forgotten that wait for their forget event. When the ledger is
intact, that state at any event is simply "started, head = the head stored on the event before".
So the stored events are cut into chunks of ``CHUNK`` events, read once, in order, by this
process; each chunk is verified by a worker that assumes that state (taken from the last event
of the chunk before) and records, instead of settling them, the forgotten asserts and the forget
events it meets. The chunks are then merged in order:

* a chunk whose worker found nothing, and whose assumed state is the state the merge reached at
  its first event, is taken as it is: its forgotten asserts and forget events are replayed, in
  order, on the merge's own verifier (so a forget whose assert lies in an earlier chunk is
  matched as the sequential pass matches it), and the merge moves to the chunk's end state;
* any other chunk (a problem or a note in it, an unreadable or unchained event before it, a run
  of unchained events across its start) is verified again here, event by event, from the state
  the merge reached: the sequential verifier itself.

Every chunk is thus either verified sequentially or proven to leave the sequential verifier in
the state its worker computed, with no problem and no note, so the report (problems in order,
notes, head, genesis, checkpoints) is the sequential one. Checkpoints are checked by the worker
of the chunk holding their size; signatures and the end of the ledger, after the merge.

A backend that offers ``stored_chunks`` (``ledger.stored``: SQL) is verified by
``verify_stored``: each worker reads its own chunk, with the backend's index problems found in
the same read, so no event's text is read here or sent to a worker; a chunk is read here again
only to be verified again.

Memory stays bounded: at most ``2 * jobs`` chunks are in flight, and the merge keeps only what
the sequential verifier keeps. Crypto-shred values opened with a key store (``open_value``) are
verified sequentially: the key store lives in this process.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from itertools import chain, islice
from typing import TYPE_CHECKING, Any

from agent_custody_state.ledger.checkpoints import Checkpoint
from agent_custody_state.ledger.stored import ChunkRead, LedgerChanged, StoredChunk
from agent_custody_state.ledger.verdict import START, State, VerifyReport, signatures
from agent_custody_state.ledger.verify import OpenValue, Verifier, stored_head, verify_lines

if TYPE_CHECKING:
    from agent_custody_state.ledger.checkpoints import VerifyKeys

#: Events per chunk: large enough that sending a chunk costs little against verifying it.
CHUNK = 10_000

Text = str | bytes


@dataclass(frozen=True)
class ChunkResult:
    """A worker's verification of one chunk, from the state it assumed."""

    start: State | None  # None: no state could be assumed (the event before has no head)
    end: State
    clean: bool  # no problem and no note
    log: list[tuple[Any, ...]]  # forgotten asserts and forget events, in order
    genesis: int | None
    sealed: int
    checkpoints_checked: int
    #: the backend's index problems in the chunk (``verify_stored``): ``(position, reason)``
    index_problems: list[tuple[int, str]] = field(default_factory=list)
    #: the asserts holding a value (``verdict.Forgets``): fingerprints and positions, as bytes
    live: tuple[bytes, bytes] = (b"", b"")


def verify_chunk(
    first: int,
    lines: list[Text],
    before: Text | None,
    checkpoints: list[Checkpoint],
    stable: bool = True,
) -> ChunkResult:
    """Verify events ``first``, ``first + 1``, ... from the state an intact ledger has after
    ``before`` (the event before the chunk; None: the chunk starts the ledger)."""
    if before is None:
        start: State | None = START
    else:
        head = stored_head(before)
        start = State(head, True, None, False) if head is not None else None
    if start is None:
        return ChunkResult(None, START, False, [], None, 0, 0)
    verifier = Verifier(checkpoints, log=True, stable=stable)
    verifier.resume(start)
    for seq, text in enumerate(lines, first):
        verifier.event(seq, text)
    report = verifier.report
    assert verifier.log is not None
    return ChunkResult(
        start,
        verifier.state(),
        report.problem_count == 0 and not report.notes,
        verifier.log,
        report.genesis,
        verifier.sealed,
        report.checkpoints_checked,
        live=(verifier.forgets.live.tobytes(), verifier.forgets.at.tobytes()),
    )


def default_jobs() -> int:
    """The number of processors this process may use."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)  # pragma: no cover - macOS, Windows


def worker_pool(jobs: int) -> ProcessPoolExecutor:
    """Processes for ``verify_chunk``: forked when this process runs one thread (quick to
    start, and the main module is not imported again), else from a fork server, since forking
    a process with threads can copy a lock some thread holds (the main module must then be
    importable without side effects: ``if __name__ == "__main__":``)."""
    return ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context(_start_method()))


def _start_method() -> str:
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


def verify_parallel(
    lines: Iterable[Text],
    *,
    jobs: int | None = None,
    checkpoints: Iterable[Checkpoint] = (),
    public_key: VerifyKeys | None = None,
    open_value: OpenValue | None = None,
    executor: Executor | None = None,
    chunk: int | None = None,
    stats: dict[str, int] | None = None,
) -> VerifyReport:
    """``verify_lines`` in ``jobs`` worker processes (default: one per processor; 1, a ledger
    of one chunk or less, or ``open_value``: in this process; ``chunk`` events per chunk, default
    ``CHUNK``). The report is the one
    ``verify_lines`` gives. ``executor`` lends a pool to reuse; ``stats`` (when given) receives
    the number of chunks taken from the workers (``merged``) and verified again (``rerun``)."""
    checkpoints = list(checkpoints)
    jobs = default_jobs() if jobs is None else jobs
    chunk = chunk or CHUNK
    stream = iter(lines)
    head = list(islice(stream, chunk))
    if open_value is not None or (executor is None and jobs <= 1) or len(head) < chunk:
        if stats is not None:
            stats.update(merged=0, rerun=0)
        return verify_lines(
            chain(head, stream),
            checkpoints=checkpoints,
            public_key=public_key,
            open_value=open_value,
        )
    pieces = (_Read(part) for part in chain([head], _chunks(stream, chunk)))
    return _merged(pieces, checkpoints, public_key, jobs, executor, stats)


def verify_stored(
    chunks: Iterable[StoredChunk],
    *,
    jobs: int | None = None,
    checkpoints: Iterable[Checkpoint] = (),
    public_key: VerifyKeys | None = None,
    open_value: OpenValue | None = None,
    executor: Executor | None = None,
    stats: dict[str, int] | None = None,
) -> VerifyReport:
    """``verify_parallel`` of a backend's ``stored_chunks``, each read by the worker verifying
    it, with the backend's index problems (``EventBackend.index_problems``, found in the same
    reads) in the report: the report of ``verify_lines`` over ``stored_events`` with each of
    ``index_problems`` added. One chunk, one job, or ``open_value``: read in this process."""
    checkpoints = list(checkpoints)
    jobs = default_jobs() if jobs is None else jobs
    stream = iter(chunks)
    head = list(islice(stream, 2))
    found: list[tuple[int, str]] = []
    if open_value is not None or (executor is None and jobs <= 1) or len(head) < 2:
        report = verify_lines(
            _read_here(chain(head, stream), found),
            checkpoints=checkpoints,
            public_key=public_key,
            open_value=open_value,
        )
        if stats is not None:
            stats.update(merged=0, rerun=0)
    else:
        pieces = (_Stored(c) for c in chain(head, stream))
        report = _merged(pieces, checkpoints, public_key, jobs, executor, stats, found)
    for seq, reason in found:
        report.add(seq, reason)
    return report


def _read_here(chunks: Iterable[StoredChunk], found: list[tuple[int, str]]) -> Iterator[Text]:
    """The chunks' events read in this process, their index problems added to ``found``: each
    chunk read on a thread while the one before it is verified (a database runs its statement
    without the interpreter's lock); the chunks are cut here, in order."""
    first = 1
    stream = iter(chunks)
    with ThreadPoolExecutor(1, thread_name_prefix="verify-read") as pool:
        ahead = [pool.submit(_checked, stored) for stored in islice(stream, 1)]
        while ahead:
            read = ahead.pop().result()
            following = next(stream, None)
            if following is not None:
                ahead.append(pool.submit(_checked, following))
            found.extend((first + offset, reason) for offset, reason in read.index_problems)
            yield from read.lines
            first += len(read.lines)


def _checked(stored: StoredChunk) -> ChunkRead:
    read = stored.read()
    if len(read.lines) != stored.count:
        raise LedgerChanged(
            f"a chunk of {stored.count} events now reads as {len(read.lines)}: the ledger "
            "changed while it was verified (run verify again)"
        )
    return read


def verify_stored_chunk(
    first: int, stored: StoredChunk, checkpoints: list[Checkpoint], stable: bool = True
) -> ChunkResult:
    """``verify_chunk`` of a chunk this worker reads itself, with its index problems."""
    read = _checked(stored)
    result = verify_chunk(first, read.lines, read.before, checkpoints, stable)
    found = [(first + offset, reason) for offset, reason in read.index_problems]
    return replace(result, index_problems=found)


class _Read:
    """A chunk read in this process and sent to a worker."""

    def __init__(self, lines: list[Text]) -> None:
        self.count = len(lines)
        self.lines = lines

    def submit(
        self, pool: Executor, first: int, before: Text | None, ours: Any, stable: bool
    ) -> Any:
        return pool.submit(verify_chunk, first, self.lines, before, ours, stable)

    def again(self) -> list[Text]:
        return self.lines


class _Stored:
    """A chunk its worker reads (``ledger.stored``); read here again only to verify it again."""

    def __init__(self, stored: StoredChunk) -> None:
        self.count = stored.count
        self.stored = stored
        self.lines: list[Text] | None = None  # the last event's text is the next one's "before"

    def submit(
        self, pool: Executor, first: int, before: Text | None, ours: Any, stable: bool
    ) -> Any:
        return pool.submit(verify_stored_chunk, first, self.stored, ours, stable)

    def again(self) -> list[Text]:
        return _checked(self.stored).lines


def _merged(
    pieces: Iterable[_Read | _Stored],
    checkpoints: list[Checkpoint],
    public_key: VerifyKeys | None,
    jobs: int,
    executor: Executor | None,
    stats: dict[str, int] | None,
    found: list[tuple[int, str]] | None = None,
) -> VerifyReport:
    # Forked workers share this process's string hash (its secret is copied with the memory):
    # their fingerprints of fact ids are then Python's own, the cheapest; any other worker
    # (a lent pool, a fork server) uses the stable one (``verdict.fingerprint``), as the merge.
    method = _start_method() if executor is None else None
    stable = method != "fork"
    merge = _Merge(Verifier(checkpoints, stable=stable), stable)
    if executor is not None:
        count = merge.run(executor, pieces, checkpoints, jobs)
    else:
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context(method)) as pool:
            count = merge.run(pool, pieces, checkpoints, jobs)
    if stats is not None:
        stats.update(merged=merge.merged, rerun=merge.rerun)
    if found is not None:
        found.extend(merge.index_problems)
    return signatures(merge.verifier.finish(count), checkpoints, public_key)


def _chunks(stream: Iterator[Text], size: int) -> Iterator[list[Text]]:
    while part := list(islice(stream, size)):
        yield part


class _Merge:
    """The chunks' results taken in order, or their events verified again (module docstring)."""

    def __init__(self, verifier: Verifier, stable: bool = True) -> None:
        self.verifier = verifier
        self.stable = stable  # the workers' fingerprints are ``verdict.fingerprint`` (else hash)
        self.merged = 0
        self.rerun = 0
        self.index_problems: list[tuple[int, str]] = []

    def run(
        self,
        pool: Executor,
        pieces: Iterable[_Read | _Stored],
        checkpoints: list[Checkpoint],
        jobs: int,
    ) -> int:
        inflight: deque[tuple[Future[ChunkResult], int, _Read | _Stored]] = deque()
        first = 1
        before: Text | None = None
        for piece in pieces:
            last = first + piece.count - 1
            ours = [cp for cp in checkpoints if first <= cp.size <= last]
            inflight.append((piece.submit(pool, first, before, ours, self.stable), first, piece))
            while len(inflight) >= 2 * max(jobs, 1):
                self.take(*inflight.popleft())
            first = last + 1
            before = piece.lines[-1] if piece.lines else None
        while inflight:
            self.take(*inflight.popleft())
        return first - 1

    def take(self, future: Future[ChunkResult], first: int, piece: _Read | _Stored) -> None:
        result = future.result()
        self.index_problems.extend(result.index_problems)
        verifier = self.verifier
        if not result.clean or result.start is None or result.start != verifier.state():
            self.rerun += 1
            for seq, text in enumerate(piece.again(), first):
                verifier.event(seq, text)
            return
        self.merged += 1
        for entry in result.log:
            if len(entry) == 3:
                verifier.remember(*entry)
            else:
                verifier.forgot(*entry)
        report = verifier.report
        report.checkpoints_checked += result.checkpoints_checked
        if report.genesis is None:
            report.genesis = result.genesis
        verifier.sealed += result.sealed
        verifier.forgets.live.frombytes(result.live[0])
        verifier.forgets.at.frombytes(result.live[1])
        verifier.resume(result.end)

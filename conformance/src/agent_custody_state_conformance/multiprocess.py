"""``MultiProcessConformance``: several processes on one ledger location (SPEC 3, issue 3).

For backends that promise that two processes (or two server replicas) can share a location: each
sees the other's writes at once, concurrent appends lose nothing, and two processes racing to
supersede the same fact end with exactly one accepted and the other refused with
``fact <id> is already superseded``. Subclass it and provide ``shared_location``, a location
string that ``Ledger(location)`` opens in a fresh process (through the installed plugins)::

    class TestSqliteProcesses(MultiProcessConformance):
        @pytest.fixture
        def shared_location(self, tmp_path):
            return str(tmp_path / "shared.sqlite")

Workers are spawned (not forked), so no connection or lock is inherited from the test process.
"""

from __future__ import annotations

import multiprocessing as mp
import traceback
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any

import pytest

from agent_custody_state import Ledger, LedgerError

from .rules import ConformanceSuite, rule

#: Seconds to wait for a worker's answer before declaring it hung.
_TIMEOUT = 60.0


def _worker(location: str, name: str, barrier: Any, pipe: Connection) -> None:
    """A process holding its own Ledger on ``location``; answers commands from the test."""
    try:
        ledger = Ledger(location)
    except Exception as exc:  # report, so the test fails with the reason
        pipe.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    pipe.send(("ready", None))
    with ledger:
        while True:
            command, args = pipe.recv()
            try:
                if command == "stop":
                    pipe.send(("ok", None))
                    return
                if command == "assert":
                    pipe.send(("ok", ledger.assert_fact(**args).fact_id))
                elif command == "as_of":
                    pipe.send(("ok", [f.to_dict() for f in ledger.as_of(**args)]))
                elif command == "race":
                    barrier.wait(timeout=_TIMEOUT)
                    try:
                        event = ledger.assert_fact(**args, value=name)
                    except LedgerError as exc:
                        pipe.send(("refused", str(exc)))
                    else:
                        pipe.send(("ok", event.fact_id))
                elif command == "burst":
                    barrier.wait(timeout=_TIMEOUT)
                    for i in range(args["n"]):
                        ledger.assert_fact(
                            subject=f"{name}:{i}", predicate="p", value=i, space="burst", actor=name
                        )
                    pipe.send(("ok", args["n"]))
                elif command == "mixed":
                    barrier.wait(timeout=_TIMEOUT)
                    _mixed(ledger, name, args["n"])
                    pipe.send(("ok", args["n"]))
                else:
                    pipe.send(("error", f"unknown command {command}"))
            except Exception:
                pipe.send(("error", traceback.format_exc()))


def _mixed(ledger: Ledger, name: str, rounds: int) -> None:
    """Every kind of write the ledger chains: single asserts, batches, retract, forget."""
    for i in range(rounds):
        one = ledger.assert_fact(
            subject=f"{name}:{i}", predicate="p", value=i, space="mixed", actor=name
        )
        ledger.assert_many(
            [
                {"subject": f"{name}:{i}:{j}", "predicate": "p", "value": j, "space": "mixed"}
                | {"actor": name}
                for j in range(3)
            ]
        )
        if i % 2:
            ledger.retract(fact_id=one.fact_id, actor=name, reason="r")
        else:
            ledger.forget(fact_id=one.fact_id, actor=name, reason="erase")


class _Worker:
    def __init__(self, ctx: Any, location: str, name: str, barrier: Any) -> None:
        self.name = name
        self.pipe, child = ctx.Pipe()
        self.process = ctx.Process(
            target=_worker, args=(location, name, barrier, child), daemon=True
        )
        self.process.start()
        status, detail = self.receive()
        assert status == "ready", f"worker {name} could not open the ledger: {detail}"

    def send(self, command: str, args: dict[str, Any] | None = None) -> None:
        self.pipe.send((command, args or {}))

    def receive(self) -> tuple[str, Any]:
        if not self.pipe.poll(_TIMEOUT):
            raise AssertionError(f"worker {self.name} did not answer within {_TIMEOUT} s")
        answer: tuple[str, Any] = self.pipe.recv()
        return answer

    def call(self, command: str, args: dict[str, Any] | None = None) -> Any:
        self.send(command, args)
        status, value = self.receive()
        assert status == "ok", f"worker {self.name}: {value}"
        return value

    def stop(self) -> None:
        try:
            self.send("stop")
            self.receive()
        finally:
            self.process.join(10)
            if self.process.is_alive():
                self.process.kill()


class MultiProcessConformance(ConformanceSuite):
    """Two worker processes and the test process share one location."""

    __suite_root__ = True
    #: supersession races per test run; each is an independent chance for a lost update
    race_trials: int = 40

    @pytest.fixture
    def shared_location(self) -> str:
        raise NotImplementedError("provide a shared_location fixture: a location string")

    @pytest.fixture
    def workers(self, shared_location: str) -> Iterator[tuple[_Worker, _Worker, Any]]:
        ctx = mp.get_context("spawn")
        barrier = ctx.Barrier(2)
        # Create the location first, so the workers race on data, not on schema creation.
        Ledger(shared_location).close()
        started: list[_Worker] = []
        try:
            for name in ("w1", "w2"):
                started.append(_Worker(ctx, shared_location, name, barrier))
            yield started[0], started[1], barrier
        finally:
            for worker in started:
                worker.stop()

    @rule("MP-1")
    def test_processes_see_each_other(
        self, shared_location: str, workers: tuple[_Worker, _Worker, Any]
    ) -> None:
        """A write committed by one process is visible to the next read of every other process,
        with no reopen and no refresh call.

        Troubleshooting: reads must not be served from a cache or a transaction snapshot taken
        before the other process committed (SQLite: no open read transaction between calls;
        Postgres: autocommit reads, or READ COMMITTED per statement).
        """
        w1, w2, _ = workers
        with Ledger(shared_location) as here:
            for round_ in range(5):
                fid = w1.call(
                    "assert",
                    {
                        "subject": f"s{round_}",
                        "predicate": "p",
                        "value": "from-w1",
                        "space": "mp",
                        "actor": "w1",
                    },
                )
                seen = w2.call("as_of", {"subject": f"s{round_}"})
                assert [f["factId"] for f in seen] == [fid]
                assert [f.fact_id for f in here.as_of(subject=f"s{round_}")] == [fid]
                mine = here.assert_fact(
                    subject=f"t{round_}", predicate="p", value="here", space="mp", actor="test"
                )
                for worker in (w1, w2):
                    seen = worker.call("as_of", {"subject": f"t{round_}"})
                    assert [f["factId"] for f in seen] == [mine.fact_id]

    @rule("MP-2")
    def test_concurrent_appends_lose_nothing(
        self, shared_location: str, workers: tuple[_Worker, _Worker, Any]
    ) -> None:
        """Two processes appending at the same time: every event is kept, each exactly once.

        Troubleshooting: every append must run inside the backend's cross-process write lock.
        """
        w1, w2, _ = workers
        n = 60
        for worker in (w1, w2):
            worker.send("burst", {"n": n})
        for worker in (w1, w2):
            status, detail = worker.receive()
            assert status == "ok", detail
        with Ledger(shared_location) as here:
            assert here.count() == 2 * n
            subjects = sorted(f.subject for f in here.as_of(space="burst"))
            assert subjects == sorted(f"{w}:{i}" for w in ("w1", "w2") for i in range(n))

    @rule("MP-3")
    def test_supersession_race(
        self, shared_location: str, workers: tuple[_Worker, _Worker, Any]
    ) -> None:
        """Two processes supersede the same fact at the same moment, many times: each time
        exactly one is accepted and the other is refused with ``fact <id> is already
        superseded``, and exactly one value is current afterwards.

        Troubleshooting: ``transaction()`` must take a lock that excludes other processes'
        write sections *before* the ledger re-reads and validates (SQLite ``BEGIN IMMEDIATE``,
        Postgres ``LOCK TABLE`` or an advisory lock), and must hold it until the commit.
        """
        w1, w2, _ = workers
        with Ledger(shared_location) as here:
            for trial in range(self.race_trials):
                base = here.assert_fact(
                    subject=f"race:{trial}",
                    predicate="owner",
                    value="base",
                    space="mp",
                    actor="test",
                )
                args = {
                    "subject": f"race:{trial}",
                    "predicate": "owner",
                    "space": "mp",
                    "actor": "racer",
                    "supersedes": base.fact_id,
                }
                for worker in (w1, w2):
                    worker.send("race", args)
                answers = [w1.receive(), w2.receive()]
                statuses = sorted(status for status, _ in answers)
                assert statuses == ["ok", "refused"], f"trial {trial}: {answers}"
                refusal = next(detail for status, detail in answers if status == "refused")
                assert refusal == f"fact {base.fact_id} is already superseded"
                winner = next(detail for status, detail in answers if status == "ok")
                current = here.as_of(subject=f"race:{trial}")
                assert [f.fact_id for f in current] == [winner], f"trial {trial}"

    @rule("MP-4")
    def test_concurrent_writers_keep_one_chain(
        self, shared_location: str, workers: tuple[_Worker, _Worker, Any]
    ) -> None:
        """Two processes writing at the same time (single asserts, batches, retracts, forgets)
        leave one valid chain: every event has the next sequence number, every link and leaf
        verifies, and the head both see is the last event's.

        Troubleshooting: the ledger reads the chain head inside the write section, so
        ``last_event`` must see the other process's committed writes there (no cached or
        snapshot read), and the section must exclude the other process until its commit.
        """
        from agent_custody_state.ledger.verify import verify_lines

        w1, w2, _ = workers
        rounds = 15
        for worker in (w1, w2):
            worker.send("mixed", {"n": rounds})
        for worker in (w1, w2):
            status, detail = worker.receive()
            assert status == "ok", detail
        with Ledger(shared_location) as here:
            assert here.count() == 2 * rounds * 5
            report = verify_lines(here.backend.stored_events())
            assert report.ok, report.problems[:5]
            assert report.events == here.count() and report.genesis == 1
            assert here.chain_head().hash == report.head

    @rule("MP-5")
    def test_racing_writers_keep_every_rule(self, shared_location: str) -> None:
        """Four processes supersede, retract, hold, release and forget a few shared facts at
        random while this process reads the events in order again and again: the history
        obeys every rule when replayed (no two winners of a race), forgotten facts keep no
        value, transaction time never goes backwards, the chain verifies, and no event commits
        behind a reader's position (``races``).

        Troubleshooting: every rule a write checks must be checked inside the section that
        excludes the writers of the same fact, and events must become visible in append order
        (PostgreSQL: inserts only under the order lock; a sequence is not transactional).
        """
        from .races import run_races

        Ledger(shared_location).close()
        run_races(shared_location)

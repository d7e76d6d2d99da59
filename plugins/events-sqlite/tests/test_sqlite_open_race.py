"""Processes opening a new SQLite ledger at the same moment all open it.

Each turns the new file to WAL; SQLite answered one of two such processes "database is locked"
at once (both hold a shared lock and want the exclusive one: it refuses rather than deadlock),
and the open failed: ``cannot open ...: database is locked``. The demo, which starts two servers
on a new ledger, failed so now and then; its refused process then took the new files away
under the other (``disk I/O error``). The switch is asked again until the busy timeout.
"""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger

ROUNDS = 40

pytestmark = pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(),
    reason="the race needs processes forked at once (fork start method), not on this platform",
)


def _open_and_write(path: str, barrier: Any, results: Any) -> None:
    barrier.wait()
    try:
        with Ledger(path) as ledger:
            ledger.assert_fact(
                subject="acct:1", predicate=f"p{os.getpid()}", value=1, space="org", actor="a"
            )
        results.put("ok")
    except Exception as exc:  # reported to the test, which names it
        results.put(f"{type(exc).__name__}: {exc}")


def test_two_processes_opening_a_new_ledger_at_once_both_open(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    outcomes: list[str] = []
    for turn in range(ROUNDS):
        path = str(tmp_path / f"ledger{turn}.sqlite")
        barrier, results = context.Barrier(2), context.Queue()
        workers = [
            context.Process(target=_open_and_write, args=(path, barrier, results)) for _ in range(2)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(60)
        outcomes += [results.get(timeout=5) for _ in workers]
        with Ledger(path) as ledger:
            assert len(list(ledger.export())) == 2, path
    assert [o for o in outcomes if o != "ok"] == []

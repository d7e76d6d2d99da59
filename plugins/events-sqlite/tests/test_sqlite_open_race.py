"""Processes opening a new SQLite ledger at the same moment all open it.

Each turns the new file to WAL; SQLite answered one of two such processes "database is locked"
at once (both hold a shared lock and want the exclusive one: it refuses rather than deadlock),
and the open failed: ``cannot open ...: database is locked``. The demo, which starts two servers
on a new ledger, failed so now and then; its refused process then took the new files away
under the other (``disk I/O error``). The switch is asked again until the busy timeout.

The race runs in a fresh interpreter (this file run as a script), which forks its pairs of
openers: forked, they start within microseconds of each other, as the race needs, and never
from the test process, whose threads a fork could leave holding locks.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROUNDS = 80

pytestmark = pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(),
    reason="the race needs processes forked at once (fork start method), not on this platform",
)


def _open_and_write(path: str, barrier: Any, results: Any) -> None:
    from agent_custody_state import Ledger

    barrier.wait()
    try:
        with Ledger(path) as ledger:
            ledger.assert_fact(
                subject="acct:1", predicate=f"p{os.getpid()}", value=1, space="org", actor="a"
            )
        results.put("ok")
    except Exception as exc:  # reported to the test, which names it
        results.put(f"{type(exc).__name__}: {exc}")


def race(folder: Path) -> list[str]:
    """Open ``ROUNDS`` new ledgers in ``folder``, two forked processes each; every outcome."""
    from agent_custody_state import Ledger

    with Ledger(str(folder / "warm.sqlite")):
        pass  # plugins loaded before the forks: the pair then opens within microseconds
    context = multiprocessing.get_context("fork")
    outcomes: list[str] = []
    for turn in range(ROUNDS):
        path = str(folder / f"ledger{turn}.sqlite")
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
            outcomes.append(f"{len(list(ledger.export()))} events")
    return outcomes


def test_two_processes_opening_a_new_ledger_at_once_both_open(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, __file__, str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    outcomes = json.loads(done.stdout)
    assert len(outcomes) == 3 * ROUNDS
    assert [o for o in outcomes if o not in ("ok", "2 events")] == []


if __name__ == "__main__":
    print(json.dumps(race(Path(sys.argv[1]))))

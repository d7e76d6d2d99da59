"""Transaction time follows append order across writers (regression: an assert used to take
its time before the write lock, so a writer that waited for the lock appended an earlier time
after a later one, and a read "as of" the instant between changed once it landed)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

from agent_custody_state import Ledger

EARLY = datetime(2026, 9, 1, 10, 0, 0, tzinfo=UTC)
LATE = datetime(2026, 9, 1, 10, 0, 1, tzinfo=UTC)


def test_an_assert_waiting_for_the_lock_is_not_stamped_before_the_writer_ahead(
    tmp_path: Path,
) -> None:
    path = tmp_path / "l.jsonl"
    go, done = threading.Event(), threading.Event()

    def other_writer() -> None:
        go.wait(10)
        with Ledger(path, clock=lambda: LATE) as other:
            other.assert_fact(subject="s", predicate="q", value="late", space="org", actor="b")
        done.set()

    def slow_clock() -> datetime:
        # Reading the clock lets the other writer run; if the lock is held meanwhile (the fix),
        # it waits for us and the wait here times out.
        go.set()
        done.wait(0.5)
        return EARLY

    thread = threading.Thread(target=other_writer)
    thread.start()
    with Ledger(path, clock=slow_clock) as ledger:
        ledger.assert_fact(subject="s", predicate="p", value="early", space="org", actor="a")
    thread.join(10)
    with Ledger(path) as ledger:
        times = [e.tx_time for e in ledger.export()]
    assert times == sorted(times), times

"""Transaction time follows append order across writers (regression: an assert used to take
its time before the write lock, so a writer that waited for the lock appended an earlier time
after a later one, and a read "as of" the instant between changed once it landed)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.errors import LedgerError

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


def _clock(*moments: datetime) -> Callable[[], datetime]:
    """A clock returning ``moments`` in turn, then the last one forever."""
    left = list(moments)
    return lambda: left.pop(0) if len(left) > 1 else left[0]


def test_the_event_carries_the_stamp_of_the_ordered_phase(tmp_path: Path) -> None:
    """A write is checked at a provisional stamp and stamped again in the ordered phase, just
    before it is sealed: the event carries the second reading, and a ``validFrom`` the caller
    left out follows it (one given stays)."""
    with Ledger(tmp_path / "l.jsonl", clock=_clock(EARLY, LATE)) as ledger:
        event = ledger.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")
    assert event.tx_time == event.fact.valid_from == "2026-09-01T10:00:01.000Z"
    with Ledger(tmp_path / "m.jsonl", clock=_clock(EARLY, LATE)) as ledger:
        [event] = ledger.assert_many(
            [dict(subject="s", predicate="p", value=1, space="org", actor="a", valid_from=EARLY)]
        )
    assert event.tx_time == "2026-09-01T10:00:01.000Z"
    assert event.fact.valid_from == "2026-09-01T10:00:00.000Z"


@pytest.mark.parametrize("bulk", [False, True])
def test_the_replacement_rule_is_checked_again_at_the_final_stamp(
    tmp_path: Path, bulk: bool
) -> None:
    """The replacement passes at its provisional stamp but would start before the fact it
    supersedes at the final one (the clock stepped back between them): refused, nothing
    written."""
    path = tmp_path / "l.jsonl"
    with Ledger(path, clock=lambda: EARLY) as ledger:
        old = ledger.assert_fact(
            subject="s", predicate="p", value=1, space="org", actor="a",
            valid_from=datetime(2026, 9, 1, 10, 0, 0, 500000, tzinfo=UTC),
        )  # fmt: skip
    before = path.read_bytes()
    request = dict(subject="s", predicate="p", value=2, space="org", actor="a")
    with Ledger(path, clock=_clock(LATE, EARLY)) as ledger:
        with pytest.raises(LedgerError) as refused:
            if bulk:
                ledger.assert_many([{**request, "supersedes": old.fact_id}])
            else:
                ledger.assert_fact(**request, supersedes=old.fact_id)
    assert refused.value.code == "bad_replacement"
    assert str(refused.value).startswith("item 0: ") == bulk
    assert path.read_bytes() == before

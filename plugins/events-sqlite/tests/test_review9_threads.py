"""Ninth review, threads: one SQLite ``Ledger`` shared by many threads (and two opened on one
file). The backend's read state and the rows a write section remembers are the object's, shared
by every thread; a thread must look at them only holding the backend's lock."""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.verify import verify_lines
from agent_custody_state_conformance.threads import (
    behind,
    spy_on,
    supersede_round,
    switching_often,
)

FACT: dict[str, Any] = {"subject": "s", "predicate": "p", "space": "o", "actor": "a"}


@pytest.fixture
def fast_switching() -> Iterator[None]:
    with switching_often():
        yield


def test_a_single_read_beside_another_threads_read_leaves_no_snapshot_open(
    tmp_path: Path,
) -> None:
    """A read of one question looked at ``_solo`` without the lock, found another thread's
    ``consistent`` read there and opened a snapshot for it that nothing ended: every later write
    failed ("cannot start a transaction within a transaction") and reads saw that snapshot."""
    with Ledger(tmp_path / "l.sqlite") as ledger:
        fact_id = ledger.assert_fact(value=1, **FACT).fact.fact_id
        spy = spy_on(ledger)
        backend = ledger.backend

        def hold(pause: Callable[[], None]) -> None:
            def read() -> int:
                backend.history(fact_id)  # the read's first question
                pause()
                return 0

            backend.consistent(read)

        seen = behind(spy, hold, lambda: ledger.history(fact_id))
        assert [e.fact_id for e in seen] == [fact_id]
        assert not backend._in_read  # type: ignore[attr-defined]
        later = ledger.assert_fact(value=2, supersedes=fact_id, **FACT)  # was refused
        assert [e.event_id for e in ledger.history(fact_id)][-1] == later.event_id


def test_a_read_of_the_last_row_during_a_section_is_not_kept_for_the_next(
    tmp_path: Path,
) -> None:
    """``last_event`` from another thread saw the section's depth, read the last row after the
    section ended and kept it as the next section's: once another connection (here a second
    ledger on the file) appended, this ledger chained its next event to a head that was no
    longer the last one, and the file no longer verified."""
    path = tmp_path / "l.sqlite"
    with Ledger(path) as one, Ledger(path) as two:
        fact_id = one.assert_fact(value=1, **FACT).fact.fact_id
        spy = spy_on(one)

        def held(pause: Callable[[], None]) -> None:  # paused in the section, after its reads
            one.retract(fact_id=fact_id, actor="a", reason="r", precondition=lambda _: pause())

        behind(spy, held, one.backend.last_event)
        two.assert_fact(value=2, **{**FACT, "subject": "t"})
        one.assert_fact(value=3, **{**FACT, "subject": "u"})
        report = verify_lines(one.backend.stored_events())
        assert report.ok, report


def test_a_compaction_beside_another_threads_section_waits_for_it(tmp_path: Path) -> None:
    """``compact`` (which every forget runs after its commit) took another thread's open
    section for its own and refused ("cannot run inside a transaction"): a forget, committed,
    was reported to its caller as failed."""
    with Ledger(tmp_path / "l.sqlite") as ledger:
        fact_id = ledger.assert_fact(value=1, **FACT).fact.fact_id
        spy = spy_on(ledger)

        def held(pause: Callable[[], None]) -> None:
            ledger.retract(fact_id=fact_id, actor="a", reason="r", precondition=lambda _: pause())

        behind(spy, held, ledger.compact)
        assert ledger.is_retracted(fact_id)


def test_threads_superseding_one_fact_and_forgetting_under_readers(
    tmp_path: Path, fast_switching: None
) -> None:
    """Four threads supersede the current fact, round after round: exactly one wins each round
    and the others are refused with ``LedgerError``, while two threads read as-of and history
    and the fact replaced is forgotten each round (a few hundred operations); no reader fails
    and the chain verifies."""
    with Ledger(tmp_path / "l.sqlite") as ledger:
        current = ledger.assert_fact(value="v0", **FACT).fact.fact_id
        stop = threading.Event()
        failures: list[str] = []

        def read(which: int) -> None:
            while not stop.is_set():
                try:
                    ledger.as_of(space="o") if which else ledger.history(current)
                except BaseException:
                    failures.append(traceback.format_exc())
                    return

        readers = [threading.Thread(target=read, args=(i,)) for i in range(2)]
        for reader in readers:
            reader.start()
        try:
            for round_ in range(40):
                won, lost = supersede_round(ledger, current, round_, FACT, batches=False)
                assert len(won) == 1, (won, lost)
                assert len(lost) == 3 and all(isinstance(e, LedgerError) for e in lost), lost
                ledger.forget(fact_id=current, actor="a", reason="r")
                current = won[0]
        finally:
            stop.set()
            for reader in readers:
                reader.join(10)
        assert not failures, failures[0]
        assert verify_lines(ledger.backend.stored_events()).ok

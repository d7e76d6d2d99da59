"""Writers on different facts do not queue behind each other (issue 15); writers of one fact do.

Writer A opens a write section and holds it open after validating (a precondition that waits,
before the ordered phase), while writer B, on its own connection, writes. With key locks B
validates and commits before A's section ends;
on the same fact B waits and then loses; with ``?lock=table`` B waits for A whatever it writes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.verify import verify_lines

pytestmark = pytest.mark.postgres

EARLY = datetime(2026, 9, 1, 10, 0, 0, tzinfo=UTC)
LATE = datetime(2026, 9, 1, 10, 0, 1, tzinfo=UTC)
WAIT = 10.0  # seconds: generous for a loaded machine; a blocked writer is detected long before


@pytest.fixture
def location(postgres_url: str) -> str:
    return f"{postgres_url}&table=concurrent"


class HeldSection:
    """Writer A: supersedes ``old`` and stops inside its write section until released."""

    def __init__(self, ledger: Ledger, old: str) -> None:
        self.inside = threading.Event()
        self.release = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(ledger, old), daemon=True)

    def _hold(self, _state: Any) -> None:
        self.inside.set()
        if not self.release.wait(WAIT * 3):
            raise RuntimeError("never released")

    def _run(self, ledger: Ledger, old: str) -> None:
        try:
            ledger.assert_fact(
                subject="alice", predicate="city", value="Paris", space="s", actor="a",
                supersedes=old, precondition=self._hold,
            )  # fmt: skip
        except BaseException as exc:  # reported to the test
            self.error = exc

    def start(self) -> None:
        self.thread.start()
        assert self.inside.wait(WAIT), "writer A never reached its section"

    def finish(self) -> None:
        self.release.set()
        self.thread.join(WAIT)
        assert not self.thread.is_alive()
        if self.error is not None:
            raise self.error


@pytest.fixture
def held(location: str) -> Iterator[Callable[[str], tuple[HeldSection, Ledger]]]:
    opened: list[Ledger] = []
    sections: list[HeldSection] = []

    def make(loc: str) -> tuple[HeldSection, Ledger]:
        a, b = Ledger(loc), Ledger(loc)
        opened.extend((a, b))
        old = a.assert_fact(subject="alice", predicate="city", value="Oslo", space="s", actor="a")
        section = HeldSection(a, old.fact_id)
        sections.append(section)
        section.start()
        return section, b

    yield make
    for section in sections:
        section.release.set()
        section.thread.join(WAIT)
    for ledger in opened:
        ledger.close()


def _timed(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:
            out["error"] = exc
        out["at"] = time.monotonic()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def test_writers_on_other_keys_commit_while_a_section_validates(
    held: Callable[[str], tuple[HeldSection, Ledger]], location: str
) -> None:
    """A holds its key locks mid-section (its precondition, after its reads, before its stamp)
    while B, on another subject, validates, stamps, seals and commits: the order lock is taken
    only in the ordered phase. A then stamps after B's commit, so transaction time still follows
    the append order and the chain is one valid chain."""
    section, b = held(location)
    thread, out = _timed(
        lambda: b.assert_fact(subject="bob", predicate="city", value="Rome", space="s", actor="b")
    )
    thread.join(WAIT)
    assert not thread.is_alive(), "B waited for A's open section"
    assert out.get("error") is None, out
    assert section.thread.is_alive() and not section.release.is_set()  # A was still inside
    section.finish()
    with Ledger(location) as c:
        events = list(c.export())
        assert verify_lines(c.backend.stored_events()).ok, "the two writers forked the chain"
    times = [e.tx_time for e in events]
    assert times == sorted(times), "transaction time goes backwards along the append order"
    assert [e.fact.value for e in events[-2:]] == ["Rome", "Paris"]  # type: ignore[attr-defined]


def test_writer_of_the_same_fact_waits_and_loses(
    held: Callable[[str], tuple[HeldSection, Ledger]], location: str
) -> None:
    section, b = held(location)
    old = b.as_of(subject="alice")[0].fact_id
    thread, out = _timed(
        lambda: b.assert_fact(
            subject="alice", predicate="city", value="Lima", space="s", actor="b", supersedes=old
        )
    )
    thread.join(1.0)
    assert thread.is_alive(), "B superseded the fact A is superseding without waiting for A"
    released = time.monotonic()
    section.finish()
    thread.join(WAIT)
    assert out["at"] >= released
    assert isinstance(out.get("error"), LedgerError)
    assert out["error"].code == "already_superseded"


def test_table_lock_makes_every_writer_wait(
    held: Callable[[str], tuple[HeldSection, Ledger]], location: str
) -> None:
    section, b = held(f"{location}&lock=table")
    thread, out = _timed(
        lambda: b.assert_fact(subject="bob", predicate="city", value="Rome", space="s", actor="b")
    )
    thread.join(1.0)
    assert thread.is_alive(), "?lock=table let a writer past an open write section"
    released = time.monotonic()
    section.finish()
    thread.join(WAIT)
    assert "error" not in out and out["at"] >= released


def test_a_stamp_never_precedes_the_last_event(location: str) -> None:
    """On a backend locking keys a write is checked and stamped under its key locks, before it
    waits for the order lock; a writer that took the order lock first with a later time raises
    the stamp to its own (the clock is still read once per write), so transaction time never
    goes backwards along the append order. A ``validFrom`` left out follows the stamp; one
    given stays."""
    with Ledger(location, clock=lambda: LATE) as ledger:
        first = ledger.assert_fact(subject="a", predicate="p", value=1, space="org", actor="a")
    with Ledger(location, clock=lambda: EARLY) as ledger:
        event = ledger.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")
        [other] = ledger.assert_many(
            [dict(subject="t", predicate="p", value=1, space="org", actor="a", valid_from=EARLY)]
        )
    assert first.tx_time == "2026-09-01T10:00:01.000Z"
    assert event.tx_time == event.fact.valid_from == first.tx_time
    assert other.tx_time == first.tx_time
    assert other.fact.valid_from == "2026-09-01T10:00:00.000Z"


def test_one_table_named_two_ways_takes_one_set_of_locks(postgres_url: str) -> None:
    """``events`` and ``public.events`` are one table: writers that name it differently still
    share its locks. Keyed on the written name, B superseded the fact A was superseding without
    waiting (two winners), and the two appends extended one chain head (a fork)."""
    a = Ledger(f"{postgres_url}&table=aliased")
    b = Ledger(f"{postgres_url}&table=public.aliased")
    try:
        old = a.assert_fact(subject="alice", predicate="city", value="Oslo", space="s", actor="a")
        section = HeldSection(a, old.fact_id)
        section.start()
        try:
            thread, out = _timed(
                lambda: b.assert_fact(
                    subject="alice",
                    predicate="city",
                    value="Lima",
                    space="s",
                    actor="b",
                    supersedes=old.fact_id,
                )
            )
            thread.join(1.0)
            assert thread.is_alive(), "B superseded the fact A is superseding without waiting"
        finally:
            section.finish()
        thread.join(WAIT)
        assert out["error"].code == "already_superseded"
        assert verify_lines(a.backend.stored_events()).ok
    finally:
        a.close()
        b.close()

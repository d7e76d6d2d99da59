"""Transaction time under a clock that steps back (eighth review, time and clocks).

A host's clock can step back (an NTP correction), and two processes on one JSONL file can read
clocks seconds apart. Transaction time must still follow the append order on every backend: the
ledger stamps a write at its clock's reading or at the last event's time, whichever is later,
and its "now" (what reads default to) is never before the last event. Before, JSONL and
``memory:`` kept the clock's reading as it was: a later event was stamped earlier, a read "as
of" the instant between saw the later event without the earlier one, a supersession with the
default ``validFrom`` was refused as starting before the fact it replaced, and ``as_of()`` did
not show the write just made.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger

T0 = datetime(2026, 9, 1, 10, 0, 0, tzinfo=UTC)
T0_WIRE = "2026-09-01T10:00:00.000Z"


class Clock:
    """A settable clock: ``back(seconds)`` steps it back as an NTP correction would."""

    def __init__(self, at: datetime = T0) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at

    def back(self, seconds: float) -> None:
        self.at -= timedelta(seconds=seconds)


@pytest.fixture(params=["memory", "jsonl"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], str]:
    if request.param == "memory":
        return lambda: "memory:"
    return lambda: str(tmp_path / "l.jsonl")


FIELDS: dict[str, Any] = {"subject": "acct:1", "predicate": "plan", "space": "org", "actor": "a"}


def _assert(ledger: Ledger, value: object, **more: Any) -> str:
    return ledger.assert_fact(value=value, **{**FIELDS, **more}).fact.fact_id


def test_a_clock_stepped_back_never_stamps_an_event_before_the_last(
    location: Callable[[], str],
) -> None:
    clock = Clock()
    with Ledger(location(), clock=clock) as ledger:
        first = _assert(ledger, "basic")
        clock.back(5)
        ledger.hold(fact_id=first, actor="a", reason="audit")
        ledger.release(fact_id=first, actor="a", reason="done")
        [batch] = ledger.assert_many(
            [dict(subject="x", predicate="p", value=1, space="org", actor="a")]
        )
        ledger.retract(fact_id=batch.fact.fact_id, actor="a", reason="wrong")
        ledger.forget(fact_id=first, actor="a", reason="asked")
        times = [e.tx_time for e in ledger.export()]
        assert times == [T0_WIRE] * 6  # every event at the last one's instant, none before
        assert batch.fact.valid_from == T0_WIRE  # a defaulted validFrom follows the stamp
        # A read "as of" the clock's reading sees nothing, not the later events alone.
        assert ledger.as_of(tx_at=clock.at, valid_at=clock.at) == []
        assert ledger.learned_before("2026-09-01T09:59:56Z") == []
        clock.back(-10)  # the clock passes the last stamp again: its own reading is kept
        later = ledger.confirm(fact_id=_assert(ledger, "pro"), actor="a")
        assert later.tx_time == "2026-09-01T10:00:05.000Z"


def test_a_supersession_after_the_clock_stepped_back_is_not_refused(
    location: Callable[[], str],
) -> None:
    clock = Clock()
    with Ledger(location(), clock=clock) as ledger:
        first = _assert(ledger, "basic")
        clock.back(2)
        ledger.validate_assert(value="pro", supersedes=first, **FIELDS)
        second = _assert(ledger, "pro", supersedes=first)
        [now] = ledger.as_of()
        assert (now.fact_id, now.valid_from) == (second, T0_WIRE)
        # An explicit validFrom before the fact replaced is still refused, and the rules keep
        # the SPEC 2.1 order (the start is checked before the subject).
        with pytest.raises(ValueError, match="cannot start before"):
            _assert(
                ledger, "x", subject="acct:2", supersedes=second, valid_from="2026-09-01T09:00:00Z"
            )
        clock.back(60)
        with pytest.raises(ValueError, match="cannot start before"):
            _assert(
                ledger,
                "x",
                subject="acct:2",
                supersedes=_assert(ledger, "p", valid_from="2027-01-01T00:00:00Z"),
            )


def test_the_present_is_never_before_the_last_event(location: Callable[[], str]) -> None:
    clock = Clock()
    with Ledger(location(), clock=clock) as ledger:
        _assert(ledger, "basic")
        clock.back(3600)
        assert [f.value for f in ledger.as_of()] == ["basic"]  # the write just made is believed
        assert [f.value for f in ledger.as_of(tx_at=clock.at)] == []  # not known at that time
        # ``now()`` stays the clock's reading: retention cutoffs are computed from it, so an
        # event stamped ahead of the clock never makes a sweep forget more.
        assert ledger.now() == "2026-09-01T09:00:00.000Z"


def test_two_writers_on_one_jsonl_file_with_clocks_apart_keep_append_order(
    tmp_path: Path,
) -> None:
    path = tmp_path / "shared.jsonl"
    ahead, behind = Clock(T0), Clock(T0 - timedelta(seconds=30))
    with Ledger(path, clock=ahead) as one, Ledger(path, clock=behind) as two:
        first = _assert(one, "basic")
        second = two.assert_fact(value="pro", supersedes=first, **{**FIELDS, "actor": "b"})
        assert second.tx_time == second.fact.valid_from == T0_WIRE
        assert [f.value for f in two.as_of()] == ["pro"]
        assert [f.value for f in one.as_of()] == ["pro"]
        assert [e.tx_time for e in one.export()] == [T0_WIRE, T0_WIRE]


def test_a_hand_written_last_time_is_compared_as_its_instant(tmp_path: Path) -> None:
    """The last event's time as the original or a hand-edit may spell it (+02:00): a clock
    behind that instant is raised to it in the normal form, a clock past it is kept."""
    with Ledger("memory:", clock=Clock()) as source:
        event = source.assert_fact(
            subject="acct:1", predicate="plan", value="basic", space="org", actor="a"
        ).to_dict()
    event.pop("chain", None)
    event["txTime"] = event["fact"]["validFrom"] = "2026-09-01T12:00:00+02:00"  # 10:00Z
    path = tmp_path / "hand.jsonl"
    path.write_text(json.dumps(event) + "\n", encoding="utf-8")
    clock = Clock(T0 - timedelta(minutes=1))
    with Ledger(path, clock=clock) as ledger:
        behind = ledger.hold(fact_id=event["fact"]["factId"], actor="a", reason="r")
        assert behind.tx_time == T0_WIRE
        clock.at = T0 + timedelta(hours=1)  # as text, before "2026-09-01T12:00:00+02:00"
        past = ledger.release(fact_id=event["fact"]["factId"], actor="a", reason="r")
        assert past.tx_time == "2026-09-01T11:00:00.000Z"


def test_time_edges_read_as_the_contract_says(tmp_path: Path) -> None:
    """Pinned: offsets, lower-case letters and digits past the millisecond are truncated alike
    on write and on read; validity is half-open; ``learned_before`` is strict."""
    with Ledger(tmp_path / "edges.jsonl", clock=Clock()) as ledger:
        first = _assert(ledger, "basic", valid_from="2026-09-01t05:30:00.1239+05:30")
        _assert(ledger, "pro", supersedes=first, valid_from="2026-09-02T00:00:00-00:00")

        def at(valid_at: str) -> list[object]:
            return [f.value for f in ledger.as_of(valid_at=valid_at)]

        assert ledger.get(first).valid_from == "2026-09-01T00:00:00.123Z"  # type: ignore[union-attr]
        assert at("2026-09-01T00:00:00.1230Z") == at("2026-09-01T00:00:00.1239z") == ["basic"]
        assert at("2026-09-01T00:00:00.1229999Z") == []
        assert at("2026-09-01T23:59:59.999999Z") == ["basic"]
        assert at("2026-09-02T00:00:00Z") == ["pro"]  # validTo is exclusive
        assert at("9999-12-31T23:59:59.999Z") == ["pro"]
        assert at("0001-01-01T00:00:00Z") == []
        assert ledger.learned_before(T0_WIRE) == []
        assert len(ledger.learned_before("2026-09-01T10:00:00.001Z")) == 2


def test_a_deferred_start_keeps_the_spec_order_on_a_backend_locking_keys() -> None:
    """On a backend whose writers stamp alongside (PostgreSQL; here ``memory:`` told it locks
    keys) a defaulted ``validFrom`` is compared at the final stamp. The subject rule used to be
    checked before it, so a replacement wrong on both counts got SPEC 2.1's rule 5 message
    instead of rule 4's."""
    from agent_custody_state.backends.memory import MemoryBackend

    backend = MemoryBackend()
    backend.locks_keys = True  # type: ignore[misc]
    with Ledger(backend, clock=Clock()) as ledger:
        later = _assert(ledger, "basic", valid_from="2027-01-01T00:00:00Z")
        with pytest.raises(ValueError, match="cannot start before"):
            _assert(ledger, "x", subject="acct:2", supersedes=later)
        with pytest.raises(ValueError, match="keep the subject"):
            _assert(
                ledger, "x", subject="acct:2", supersedes=later, valid_from="2027-01-01T00:00:00Z"
            )


def test_a_supersession_through_stores_after_the_clock_stepped_back(tmp_path: Path) -> None:
    """A write through stores fixes ``validFrom`` before it appends (the stores record it): at
    the ledger's present, not the clock's reading, or the replacement would start before the
    fact it supersedes and be refused."""
    import anyio

    from agent_custody_state import AssertRequest
    from agent_custody_state.stores import StoreSet
    from agent_custody_state.stores.flows import Custody
    from agent_custody_state.stores.inprocess import InProcessStore, MemoryVendor

    clock = Clock()

    async def scenario() -> None:
        with Ledger(tmp_path / "l.jsonl", clock=clock) as ledger:
            custody = Custody(ledger, StoreSet([InProcessStore("s", MemoryVendor())]))
            request = AssertRequest("acct:1", "plan", "basic", "org", "a")
            first = (await custody.write(request)).event
            clock.back(60)
            second = (
                await custody.write(request.with_(value="pro", supersedes=first.fact.fact_id))
            ).event
            assert second.fact.valid_from == second.tx_time == first.tx_time
            assert [f.value for f in ledger.as_of()] == ["pro"]

    anyio.run(scenario)


@pytest.mark.parametrize("where", ["memory", "jsonl"])
def test_a_batch_names_its_first_refused_item_when_a_start_was_left_to_the_final_stamp(
    where: str, tmp_path: Path
) -> None:
    """A replacement's start is checked at the final stamp; a later item refused at once (its
    subject) must not be named before it: the first refusal in item order, as SPEC 2.1's
    ``assert_many`` reports, whatever the check's timing."""
    location = "memory:" if where == "memory" else str(tmp_path / "l.jsonl")
    with Ledger(location, clock=Clock()) as ledger:
        future = _assert(ledger, "basic", valid_from="2027-01-01T00:00:00Z")
        other = _assert(ledger, "other")
        item = {"subject": "acct:1", "predicate": "plan", "space": "org", "actor": "b"}
        with pytest.raises(Exception) as caught:
            ledger.assert_many(
                [
                    {**item, "value": "pro", "supersedes": future},  # starts before it: refused
                    {**item, "value": "x", "predicate": "seats", "supersedes": other},
                ]
            )
    assert str(caught.value) == "item 0: replacement cannot start before the fact it supersedes"


def test_a_stamp_held_far_ahead_of_the_clock_is_told_once(
    location: Callable[[], str], caplog: pytest.LogCaptureFixture
) -> None:
    """An event stamped in the future (an import from a host whose clock ran ahead, a hand
    edit) holds every later write at its time: the first such write says so, once."""
    clock = Clock()
    with Ledger(location(), clock=clock) as ledger:
        _assert(ledger, "basic")
        clock.back(60)  # within the skew of two hosts' clocks: nothing said
        _assert(ledger, "pro")
        assert not [r for r in caplog.records if "ahead of this host's clock" in r.message]
        clock.back(3600)
        _assert(ledger, "team")
        _assert(ledger, "free")
    told = [r.message for r in caplog.records if "ahead of this host's clock" in r.message]
    assert len(told) == 1 and "stamped 2026-09-01T10:00:00.000Z" in told[0], told
    assert "1:01:00 ahead" in told[0]

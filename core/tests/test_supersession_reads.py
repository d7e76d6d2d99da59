"""Reads that follow a supersession chain past a retracted link (SPEC 2.2, "effective
superseder"): an as-of by subject answers from its one question, and a chain that leaves the
subject (possible only in an imported or hand-made ledger) is still followed, by asking."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_custody_state import Ledger
from agent_custody_state.backends.memory import MemoryBackend
from agent_custody_state.ledger import queries
from agent_custody_state.ledger.model import AssertEvent, Event, Fact, RetractEvent, Source
from agent_custody_state.ledger.queries import effective_superseders, states_from

T0 = "2026-01-01T00:00:0{}.000Z"


@pytest.fixture
def ledger() -> Iterator[Ledger]:
    with Ledger(MemoryBackend(), chain=False) as opened:
        yield opened


def _questions(ledger: Ledger) -> list[int]:
    """Counts the ``events_around`` questions a read asks beyond its own ``asserts_around``
    (which, on this backend, asks ``events_around`` itself: not counted)."""
    asked = [0]
    inside = [False]
    backend = ledger.backend
    real_around, real_asserts = backend.events_around, backend.asserts_around

    def counted(ids: object) -> list[Event]:
        asked[0] += not inside[0]
        return real_around(ids)  # type: ignore[arg-type]

    def own(**filters: object) -> object:
        inside[0] = True
        try:
            return real_asserts(**filters)  # type: ignore[arg-type]
        finally:
            inside[0] = False

    backend.events_around = counted  # type: ignore[method-assign]
    backend.asserts_around = own  # type: ignore[method-assign, assignment]
    return asked


def test_a_retracted_middle_link_is_followed_without_another_question(ledger: Ledger) -> None:
    fact = {"subject": "acct:1", "predicate": "plan", "space": "org", "actor": "a"}
    a = ledger.assert_fact(**fact, value="a", valid_from="2026-01-01T00:00:00Z")
    b = ledger.assert_fact(
        **fact, value="b", supersedes=a.fact_id, valid_from="2026-02-01T00:00:00Z"
    )
    c = ledger.assert_fact(
        **fact, value="c", supersedes=b.fact_id, valid_from="2026-03-01T00:00:00Z"
    )
    d = ledger.assert_fact(
        **fact, value="d", supersedes=c.fact_id, valid_from="2026-04-01T00:00:00Z"
    )
    ledger.retract(fact_id=b.fact_id, actor="x", reason="poisoned")
    ledger.retract(fact_id=c.fact_id, actor="x", reason="poisoned")
    asked = _questions(ledger)
    early = ledger.as_of(subject="acct:1", valid_at="2026-02-15T00:00:00Z")
    assert [(f.value, f.valid_to) for f in early] == [("a", "2026-04-01T00:00:00.000Z")]
    timeline = ledger.timeline("acct:1")
    assert timeline.facts[0].valid_to == "2026-04-01T00:00:00.000Z"
    assert asked == [0]  # A <- B (retracted) <- C (retracted) <- D, all in the one answer
    assert [f.fact_id for f in ledger.as_of(subject="acct:1")] == [d.fact_id]


def test_a_chain_that_leaves_the_subject_is_followed_by_asking(ledger: Ledger) -> None:
    # Hand-made: B supersedes A under another subject (the ledger would refuse it; an import
    # takes events as they are), then C supersedes B. B is retracted, so C supersedes A.
    def assert_event(n: int, subject: str, supersedes: str | None) -> AssertEvent:
        fact = Fact(
            f"f{n}", subject, "plan", n, "org", "a", Source(None), "claimed", None, T0.format(n)
        )
        return AssertEvent(f"e{n}", T0.format(n), fact, supersedes)

    events: list[Event] = [
        assert_event(1, "acct:1", None),
        assert_event(2, "acct:2", "f1"),
        assert_event(3, "acct:2", "f2"),
        RetractEvent("e4", T0.format(4), "f2", "x", "wrong", Source(None)),
    ]
    ledger.import_events(events)
    asked = _questions(ledger)
    facts = ledger.as_of(subject="acct:1", valid_at=T0.format(2))
    assert [(f.fact_id, f.valid_to) for f in facts] == [("f1", T0.format(3))]
    assert asked == [1]  # B is not among acct:1's facts: its superseders had to be asked for


def _t(ms: int) -> str:
    return f"2026-01-01T00:{ms // 60_000:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}Z"


def test_a_long_chain_of_retracted_links_is_followed(ledger: Ledger) -> None:
    """A0 <- A1 <- ... <- A1500 with A1..A1499 retracted: A1500 supersedes A0 (the walk was a
    recursive function, which hit the recursion limit at about a thousand links)."""
    n = 1500
    events: list[Event] = []
    for i in range(n + 1):
        fact = Fact(f"f{i}", "acct:1", "plan", i, "org", "a", valid_from=_t(i))
        events.append(AssertEvent(f"e{i}", _t(i), fact, f"f{i - 1}" if i else None))
    events += [
        RetractEvent(f"r{i}", _t(n + i), f"f{i}", "a", "poisoned", Source()) for i in range(1, n)
    ]
    ledger.import_events(events)
    first = ledger.get("f0")
    assert first is not None and first.valid_to == _t(n)
    assert [f.fact_id for f in ledger.as_of(subject="acct:1")] == [f"f{n}"]


def test_reads_and_writes_leave_nothing_for_the_garbage_collector(ledger: Ledger) -> None:
    """No read or write builds a reference cycle: the effective-superseder walk was a nested
    recursive function (a cycle with its closure), so every as-of, get and supersession left
    its events to the cyclic collector, whose frequent passes were most of the reads' p99."""
    import gc

    fact = {"subject": "acct:1", "predicate": "plan", "space": "org", "actor": "a"}
    a = ledger.assert_fact(**fact, value="a")
    b = ledger.assert_fact(**fact, value="b", supersedes=a.fact_id)
    ledger.retract(fact_id=b.fact_id, actor="x", reason="poisoned")
    current = ledger.assert_fact(**fact, value="c", supersedes=a.fact_id)
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for i in range(20):
            ledger.as_of(subject="acct:1")
            ledger.get(a.fact_id)
            ledger.timeline("acct:1")
            ledger.status(a.fact_id)
            current = ledger.assert_fact(**fact, value=i, supersedes=current.fact_id)
        gc.collect()
        left = list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert left == []


class _Around:
    """A store answering ``events_around`` from a list of events, as a backend would."""

    def __init__(self, events: list[Event]) -> None:
        self.events = events

    def events_around(self, ids: object) -> list[Event]:
        wanted = set(ids)  # type: ignore[call-overload]
        return [
            e
            for e in self.events
            if e.fact_id in wanted or (isinstance(e, AssertEvent) and e.supersedes in wanted)
        ]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["assert", "assert", "assert", "retract"]),
            st.integers(0, 7),  # which fact (an assert may repeat a fact id: a hand-made file)
            st.one_of(st.none(), st.integers(0, 7)),  # what it supersedes
            st.integers(0, 9),  # its transaction time
        ),
        max_size=14,
    ),
    st.integers(0, 9),
)
@settings(max_examples=400, deadline=None)
def test_the_one_pass_superseders_agree_with_the_walk(
    script: list[tuple[str, int, int | None, int]], at: int
) -> None:
    """``effective_superseders`` answers from one pass over ``around`` when no fact's first
    superseder is retracted; its answer must be the chain walk's, whatever the events."""
    events: list[Event] = []
    for n, (kind, f, sup, tx) in enumerate(script):
        if kind == "assert":
            fact = Fact(f"f{f}", "acct:1", "plan", n, "org", "a", valid_from=_t(tx))
            events.append(AssertEvent(f"e{n}", _t(tx), fact, None if sup is None else f"f{sup}"))
        else:
            events.append(RetractEvent(f"e{n}", _t(tx), f"f{f}", "a", "r", Source()))
    tx_at = _t(at)
    states = states_from(events, tx_at=tx_at)
    ids = list(states)
    store: Any = _Around(events)
    fast = effective_superseders(store, ids, tx_at=tx_at, around=events, states=states, covered=ids)
    with patch.object(queries, "_direct_superseders", return_value=None):
        walked = effective_superseders(
            store, ids, tx_at=tx_at, around=events, states=states, covered=ids
        )
    assert fast == walked


class _Counted(dict[str, list[AssertEvent]]):
    """The superseders by fact, counting how often the walk looks a fact's up."""

    looked = 0

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        self.looked += 1
        return super().get(key, default)


@pytest.mark.parametrize("twice", [False, True])
def test_a_loop_of_retracted_superseders_is_walked_once(twice: bool) -> None:
    """A hand-made file may link retracted facts in a loop (f0 <- f1 <- f0), or name one fact in
    two asserts (``twice``): the walk went round the loop down to ``MAX_CHAIN_DEPTH``, along
    every branch (hypothesis found a read that never ended). Each fact is looked through once."""

    def assert_of(fact: str, supersedes: str, n: int) -> AssertEvent:
        facts = Fact(fact, "acct:1", "plan", n, "org", "a", valid_from=_t(n))
        return AssertEvent(f"e{n}", _t(n), facts, supersedes)

    children = _Counted()
    children["f0"] = [assert_of("f1", "f0", 1)] * (2 if twice else 1)
    children["f1"] = [assert_of("f0", "f1", 2)] * (2 if twice else 1)
    with patch.object(queries, "MAX_CHAIN_DEPTH", 16):  # a regression fails, never hangs
        assert queries._first_live(children, {"f0", "f1"}, "f0") is None
    assert children.looked <= 2
    children["f1"].append(assert_of("f2", "f1", 3))  # a live one past the loop is still found
    found = queries._first_live(children, {"f0", "f1"}, "f0")
    assert found is not None and found.fact.fact_id == "f2"

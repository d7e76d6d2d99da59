"""As-of reads past a retraction made after the transaction time asked (twenty-second review).

SPEC 2.2: a read at ``tx_at`` T considers only events with ``txTime <= T``, so a retraction or
forget made after T is not seen at T: the link it removes still stands in the chain, and the
effective superseder is found as the ledger believed it then. The histories here are supersession
chains ``a <- b <- c <- d`` whose links are retracted or forgotten one after another, some in
another space (a replacement keeps subject and predicate, not the space), so a read filtered by
space leaves links out and the walk asks for them, and what it is handed back carries the later
retractions (``queries.states_from``'s ``tx_at`` filter on a deeper level). Every read is compared
with the independent SPEC model (``specmodel.py``): ``as_of`` at every event's time and a grid of
valid times, with and without filters; ``timeline`` at those times; ``get``, ``history`` and the
extras' ``all_facts``/``get_fact`` now. The SQLite backend, which walks chains in SQL, runs the
same histories in ``plugins/events-sqlite/tests/test_review22_asof_walk_sqlite.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from specmodel import SpecModel, wire

from agent_custody_state import Ledger
from agent_custody_state.extras.ledgerview import all_facts, get_fact

#: (kind, name, space, validFrom month, supersedes) for asserts; (kind, name) otherwise.
Op = tuple[str, ...] | tuple[str, str, str, int, str | None]
HISTORIES: dict[str, list[Op]] = {
    # b retracted, then c retracted: at a T between the two, a's effective superseder is c.
    "space-crossing chain, deeper link retracted later": [
        ("assert", "a", "org", 1, None),
        ("assert", "b", "team", 2, "a"),
        ("assert", "c", "org", 3, "b"),
        ("assert", "d", "org", 4, "c"),
        ("retract", "b"),
        ("retract", "c"),
    ],
    "one-space chain, middle then head retracted": [
        ("assert", "a", "org", 1, None),
        ("assert", "b", "org", 2, "a"),
        ("assert", "c", "org", 3, "b"),
        ("retract", "b"),
        ("retract", "c"),
    ],
    "space-crossing chain, links forgotten later": [
        ("assert", "a", "org", 1, None),
        ("assert", "b", "team", 2, "a"),
        ("assert", "c", "team", 3, "b"),
        ("assert", "d", "org", 4, "c"),
        ("retract", "b"),
        ("forget", "c"),
        ("forget", "d"),
    ],
    "head retracted before the middle": [
        ("assert", "a", "team", 1, None),
        ("assert", "b", "org", 2, "a"),
        ("assert", "c", "team", 3, "b"),
        ("retract", "c"),
        ("retract", "b"),
    ],
    # Superseded again once a retraction freed the link: at a T before the new superseder's
    # assert, the walk past the retracted one must not count it.
    "superseded again after a retraction": [
        ("assert", "a", "org", 1, None),
        ("assert", "b", "team", 2, "a"),
        ("assert", "c", "org", 3, "b"),
        ("retract", "c"),
        ("assert", "d", "team", 4, "b"),
        ("retract", "b"),
        ("retract", "d"),
        ("assert", "e", "org", 5, "a"),
    ],
}
FILTERS: list[dict[str, str]] = [
    {},
    {"space": "org"},
    {"space": "team"},
    {"subject": "acct:1"},
    {"subject": "acct:1", "space": "org"},
    {"subject": "acct:1", "predicate": "plan", "space": "team"},
]
VALID_AT = [f"2026-{m:02d}-15T00:00:00Z" for m in range(1, 7)]


class SetClock:
    """The one clock both the ledger and the model read: moved one second per operation."""

    def __init__(self) -> None:
        self.now = datetime(2026, 9, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def replay(ledger: Ledger, model: SpecModel, clock: SetClock, ops: list[Op]) -> dict[str, str]:
    """Runs ``ops`` on both at the same instants; returns name -> fact id."""
    ids: dict[str, str] = {}
    for op in ops:
        clock.now += timedelta(seconds=1)
        kind, name = op[0], str(op[1])
        if kind == "assert":
            space, month, parent = op[2], op[3], op[4]
            fact = {"subject": "acct:1", "predicate": "plan", "value": name, "space": space}
            fact |= {"actor": "x", "valid_from": f"2026-{month:02d}-01T00:00:00Z"}
            sup = ids[str(parent)] if parent else None
            ids[name] = ledger.assert_fact(**fact, supersedes=sup).fact_id  # type: ignore[arg-type]
            model.assert_fact(**fact, supersedes=sup, fact_id=ids[name])  # type: ignore[arg-type]
        else:
            for target in (ledger, model):
                getattr(target, kind)(fact_id=ids[name], actor="x", reason="r")
    return ids


def model_state(model: SpecModel, tx: int, fact_id: str) -> tuple[str, str | None]:
    """What ``timeline`` says of a fact at ``tx``: its status word and validTo (SPEC 2.2)."""
    seen = model._seen(tx)
    if any(e.kind == "forget" and e.fact_id == fact_id for e in seen):
        return "forgotten", None
    if model._retracted(seen, fact_id):
        return "retracted", None
    successor = model._effective(seen, fact_id)
    if successor is None:
        return "current", None
    return "superseded", wire(successor.fact["validFrom"])


def check_history(open_ledger: Callable[[SetClock], Ledger], ops: list[Op]) -> None:
    """Every read of SPEC 2.2 at every transaction time of ``ops`` agrees with the model."""
    clock = SetClock()
    model = SpecModel(clock)
    with open_ledger(clock) as ledger:
        ids = replay(ledger, model, clock, ops)
        times = [e.tx for e in model.events]
        for tx in [times[0] - 1, *times]:
            tx_at = wire(tx)
            for where in FILTERS:
                for valid_at in VALID_AT:
                    got = ledger.as_of(valid_at=valid_at, tx_at=tx_at, **where)
                    want = model.as_of(valid_at=valid_at, tx_at=tx_at, **where)
                    assert [(f.fact_id, f.valid_to) for f in got] == [
                        (f["factId"], f["validTo"]) for f in want
                    ], (tx_at, valid_at, where)
            line = ledger.timeline("acct:1", tx_at=tx_at)
            seen = [e.fact_id for e in model._seen(tx) if e.kind == "assert"]
            assert [f.fact_id for f in line.facts] == seen, tx_at
            assert {f.fact_id: (line.states[f.fact_id], f.valid_to) for f in line.facts} == {
                i: model_state(model, tx, i) for i in seen
            }, tx_at
        for fact_id in ids.values():
            fact, stored = ledger.get(fact_id), model.get(fact_id)
            assert fact is not None and stored is not None
            assert fact.valid_to == stored["validTo"], fact_id
            assert [(e.kind, e.to_dict()["txTime"]) for e in ledger.history(fact_id)] == [
                (e["kind"], e["txTime"]) for e in model.history(fact_id)
            ]
            effective = model._effective(model.events, fact_id)
            shown = get_fact(ledger, fact_id)
            assert shown is not None
            assert shown.valid_to == (effective and wire(effective.fact["validFrom"]))
        assert {f.fact_id: f.valid_to for f in all_facts(ledger)} == {
            i: (e and wire(e.fact["validFrom"]))
            for i in ids.values()
            for e in [model._effective(model.events, i)]
        }


@pytest.mark.parametrize("name", HISTORIES)
@pytest.mark.parametrize("kind", ["memory", "jsonl"])
def test_reads_at_a_time_before_a_later_retraction_answer_what_was_believed_then(
    kind: str, name: str, tmp_path: Path
) -> None:
    location = "memory:" if kind == "memory" else str(tmp_path / "ledger.jsonl")
    check_history(lambda clock: Ledger(location, clock=clock, chain=False), HISTORIES[name])


def test_a_retraction_after_t_leaves_the_retracted_superseder_standing_at_t() -> None:
    """The case the mutation review could not tell apart, spelt out: a <- b(team) <- c <- d,
    b retracted, then c retracted. Read by space ``org`` between the two retractions, a ends
    where c starts (c still stands); after the second, where d starts."""
    clock = SetClock()
    model = SpecModel(clock)
    with Ledger("memory:", clock=clock, chain=False) as ledger:
        ops = HISTORIES["space-crossing chain, deeper link retracted later"]
        ids = replay(ledger, model, clock, ops)
        between = wire(model.events[-2].tx)  # after b's retraction, before c's
        at_then = ledger.as_of(valid_at="2026-02-15T00:00:00Z", tx_at=between, space="org")
        assert [(f.fact_id, f.valid_to) for f in at_then] == [
            (ids["a"], "2026-03-01T00:00:00.000Z")
        ]
        at_then = ledger.as_of(valid_at="2026-03-15T00:00:00Z", tx_at=between, space="org")
        assert [f.fact_id for f in at_then] == [ids["c"]]
        now = ledger.as_of(valid_at="2026-03-15T00:00:00Z", space="org")
        assert [(f.fact_id, f.valid_to) for f in now] == [(ids["a"], "2026-04-01T00:00:00.000Z")]


def test_a_sweep_plan_with_nothing_to_forget_is_empty() -> None:
    """``fact_states`` of no facts is an empty mapping, which ``plan_sweep`` reads."""
    with Ledger("memory:", chain=False) as ledger:
        assert ledger.plan_sweep(before="2026-01-01T00:00:00Z").forget == []
        ledger.assert_fact(subject="s", predicate="p", value=1, space="org", actor="x")
        plan = ledger.plan_sweep(before="2000-01-01T00:00:00Z")
        assert (plan.forget, plan.held) == ([], [])

"""The SPEC model (``specmodel.py``) extended to what ``test_spec_model.py`` leaves out.

``test_spec_model.py`` drives single asserts and the SPEC's reads. This drives the same random
histories with, in addition: ``assert_many`` batches (all or nothing, one stamp, an item may
supersede an earlier one: the same as its items asserted one by one at that instant), closing
and reopening a file ledger between operations (the indexes rebuilt from the log must answer as
before), and checks the derived reads the ledger adds (``timeline`` at every transaction time,
``status``, ``is_retracted``, ``plan_sweep``, ``key_values``) against definitions written from
SPEC 2.2-2.7. ``drive_plus`` is shared with the SQLite plugin's tests.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from specmodel import Ev, Refused, SpecModel, Wire, parse_time, wire
from test_spec_model import PREDICATES, SPACES, SUBJECTS, VALUES, Run, _first, _op, same

from agent_custody_state import Ledger
from agent_custody_state_conformance.clock import StepClock

EXAMPLES = int(os.environ.get("AGENT_CUSTODY_SPEC_MODEL_EXAMPLES", "200"))
Opener = Callable[[StepClock, str | None], Ledger]


class ModelPlus(SpecModel):
    """``SpecModel`` with batches and the ledger's derived reads, by brute force."""

    def assert_many(self, items: list[dict[str, Any]]) -> list[Wire]:
        """Each item as ``assert_fact`` at this instant; a refusal names the item and undoes
        the items before it."""
        kept = list(self.events)
        out: list[Wire] = []
        for i, item in enumerate(items):
            try:
                event = self.assert_fact(**item)
            except Refused as error:
                self.events[:] = kept
                raise Refused(f"item {i}: {error}", error.code, error.field) from None
            assert event is not None
            out.append(event)
        return out

    def _state(self, seen: list[Ev], fact_id: str) -> str:
        if any(e.kind == "forget" and e.fact_id == fact_id for e in seen):
            return "forgotten"
        if self._retracted(seen, fact_id):
            return "retracted"
        return "superseded" if self._effective(seen, fact_id) is not None else "current"

    @staticmethod
    def _held_in(seen: list[Ev], fact_id: str) -> bool:
        marks = [e.kind for e in seen if e.kind in ("hold", "release") and e.fact_id == fact_id]
        return bool(marks) and marks[-1] == "hold"

    def timeline(self, subject: str, *, tx_at: Any = None, **where: str | None) -> Wire:
        """Every fact about ``subject`` known at ``tx_at`` as a read presents it (``validTo``
        null once retracted), its state then, the held ones, and the events citing them or
        what superseded them."""
        tx = math.inf if tx_at is None else parse_time(tx_at, "tx_at")
        seen = self._seen(tx)
        asserts = [
            e
            for e in seen
            if e.kind == "assert"
            and e.fact["subject"] == subject
            and all(want is None or e.fact[key] == want for key, want in where.items())
        ]
        ids = [e.fact_id for e in asserts]
        facts = []
        for e in asserts:
            shown = self._shown(seen, e)
            if self._retracted(seen, e.fact_id):
                shown["validTo"] = None
            facts.append(shown)
        above = {e.fact_id for e in seen if e.kind == "assert" and e.supersedes in ids}
        return {
            "facts": facts,
            "states": {i: self._state(seen, i) for i in ids},
            "held": [i for i in ids if self._held_in(seen, i)],
            "events": [e.to_dict() for e in seen if e.fact_id in {*ids, *above}],
        }

    def status(self, fact_id: str) -> tuple[str, bool] | None:
        if self._assert(fact_id) is None:
            return None
        return self._state(self.events, fact_id), self.held(fact_id)

    def is_retracted(self, fact_id: str) -> bool:
        return self._retracted(self.events, fact_id)

    def plan_sweep(self, before: Any, space: str | None = None) -> Wire:
        """What ``sweep`` would do now: the asserts it would forget, the held ids it keeps."""
        listed = self.learned_before(before, space)
        held = [f["factId"] for f in listed if self.held(f["factId"])]
        forget = [self._assert(f["factId"]) for f in listed if f["factId"] not in held]
        return {"forget": [e.to_dict() for e in forget if e is not None], "held": held}

    def key_values(self, key: str, prefix: str = "", limit: int = 100) -> list[str]:
        """A fact key's values among facts not forgotten, from ``prefix``, sorted."""
        values = {
            e.fact[key]
            for e in self.events
            if e.kind == "assert" and not self._forgotten(e.fact_id)
        }
        return sorted(v for v in values if v.startswith(prefix))[:limit]


class RunPlus(Run):
    """``Run`` with the batch and reopen operations and the derived reads."""

    model: ModelPlus

    def __init__(self, opener: Opener, model: ModelPlus, clock: StepClock) -> None:
        super().__init__(opener(clock, model.forget_key), model, clock)
        self.opener = opener

    def reopen(self) -> None:
        self.ledger.close()
        self.ledger = self.opener(self.clock, self.model.forget_key)

    def many(self, drawn: list[tuple[Any, ...]]) -> None:
        """A batch of asserts drawn like single ones (an item may supersede an earlier one)."""
        items: list[dict[str, Any]] = []
        for n, (subj, pred, space, value, sup, keep) in enumerate(drawn):
            known = [*self.ids, *(item["fact_id"] for item in items)]
            supersedes = known[-1 - sup] if sup is not None and sup < len(known) else None
            old = [i for i in items if i["fact_id"] == supersedes]
            stored = self.model.get(supersedes) if supersedes and not old else None
            base = old[0] if old else stored
            subject, predicate = SUBJECTS[subj], PREDICATES[pred]
            if base is not None and keep:
                subject, predicate = base["subject"], base["predicate"]
            fact_id = f"{len(known):08x}-0000-4000-8000-{self.serial:08x}{n:04x}"
            item = dict(subject=subject, predicate=predicate, value=VALUES[value])
            item.update(space=SPACES[space], actor="bulk", supersedes=supersedes, fact_id=fact_id)
            items.append(item)
        got = self.both("assert_many", items)
        if got[0] == "ok":
            self.ids.extend(item["fact_id"] for item in items)

    def check_plus(self) -> None:
        """The derived reads, at every transaction time (and before the first event)."""
        m = self.model
        txs = sorted({e.tx for e in m.events})
        for tx in [None, *sorted({t + d for t in txs for d in (-1, 0)})]:
            at = None if tx is None else wire(tx)
            for subject in SUBJECTS:
                got = self.ledger.timeline(subject, tx_at=at)
                want = m.timeline(subject, tx_at=at)
                ours = {
                    "facts": [f.to_dict() for f in got.facts],
                    "states": got.states,
                    "held": got.held,
                    "events": [e.to_dict() for e in got.events],
                }
                same(ours, want, f"timeline({subject!r}, tx_at={at})")
        for subject, space in ((SUBJECTS[0], SPACES[1]), (SUBJECTS[1], SPACES[0])):
            got = self.ledger.timeline(subject, space=space, predicate=PREDICATES[0])
            want = m.timeline(subject, space=space, predicate=PREDICATES[0])
            same([f.to_dict() for f in got.facts], want["facts"], "timeline(filters)")
            assert got.states == want["states"] and got.held == want["held"]
        for fact_id in [*self.ids, self.ref(40)]:
            self.both("status", fact_id)
            self.both("is_retracted", fact_id)
        for tx in [*txs[:: max(1, len(txs) // 3)], self.now + 1]:
            for where in (None, *SPACES):
                plan = self.ledger.plan_sweep(wire(tx), where)
                got_plan = {"forget": [e.to_dict() for e in plan.forget], "held": plan.held}
                same(got_plan, m.plan_sweep(wire(tx), where), f"plan_sweep({tx}, {where})")
        for key in ("subject", "predicate", "space", "factId"):
            for prefix, limit in (("", 100), ("acct:", 2), ("t", 100), ("zz", 5)):
                self.both("key_values", key, prefix, limit)


_item = st.tuples(
    st.integers(0, 2),
    st.integers(0, 1),
    st.integers(0, 2),
    st.sampled_from([*range(11)] * 4 + [11]),  # rarely a value the ledger refuses
    st.one_of(st.none(), st.integers(0, 3), st.just(60)),  # a recent fact, or an unknown id
    st.sampled_from((True, True, True, False)),
)
_plus = st.one_of(
    _op.map(lambda op: ("op", op)),
    st.tuples(st.just("many"), st.lists(_item, min_size=1, max_size=4)),
    st.just(("reopen",)),
)
_case = st.tuples(
    st.lists(_first, min_size=1, max_size=2),
    st.lists(_plus, min_size=8, max_size=30),
    st.booleans(),
)


def drive_plus(opener: Opener, case: tuple[Any, ...], *, reopens: bool) -> RunPlus:
    """Play a drawn case on the ledger ``opener`` opens and on the model; every reopen
    (``reopens``: a file backend) must leave every answer unchanged."""
    firsts, ops, keyed = case
    clock = StepClock(step=timedelta(0))
    key = "forget-key" if keyed else None
    run = RunPlus(opener, ModelPlus(clock, forget_key=key), clock)
    try:
        for first in firsts:
            run.apply(first)
        for op in ops:
            if op[0] == "op":
                run.apply(op[1])
            elif op[0] == "many":
                run.clock.advance(milliseconds=1)
                run.serial += 1
                run.many(op[1])
            elif reopens:
                run.reopen()
                run.both("export")
            run.both("as_of")
        run.check_all()
        run.check_plus()
        if reopens:
            run.reopen()
            run.check_all()
            run.check_plus()
    finally:
        run.ledger.close()
    return run


_settings = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))


@_settings
@given(_case)
def test_memory_ledger_batches_and_derived_reads_match_the_model(case: tuple[Any, ...]) -> None:
    drive_plus(
        lambda clock, key: Ledger("memory:", clock=clock, forget_key=key), case, reopens=False
    )


@settings(_settings, max_examples=max(5, EXAMPLES // 8))
@given(_case)
def test_jsonl_ledger_reopened_between_operations_matches_the_model(
    case: tuple[Any, ...],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.jsonl"
        drive_plus(lambda clock, key: Ledger(path, clock=clock, forget_key=key), case, reopens=True)

"""Random operation sequences against the ledger and the independent SPEC model (specmodel.py).

Each drawn operation runs on ``Ledger("memory:")`` (or a JSONL file) and on the model at the
same clock reading; the outcome (the event, or the refusal's text and code) must agree, and so
must every read afterwards: ``as_of`` over a grid of (valid_at, tx_at) points around every event
and every ``validFrom`` (before the first event too), with filters and ``include``; ``get``,
``history``, ``held``, ``facts``, ``learned_before``, ``spaces``, ``count``, ``export``.
``AGENT_CUSTODY_SPEC_MODEL_EXAMPLES`` raises the example count (default 200).
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from specmodel import Refused, SpecModel, ms, wire

from agent_custody_state import Ledger, LedgerError
from agent_custody_state_conformance.clock import StepClock

NAIVE = datetime(2026, 9, 1)  # no tzinfo: refused like a string without an offset
Case = tuple[list[Any], bool]
EXAMPLES = int(os.environ.get("AGENT_CUSTODY_SPEC_MODEL_EXAMPLES", "200"))
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
FACT_KEYS = [
    "factId",
    "subject",
    "predicate",
    "value",
    "space",
    "actor",
    "source",
    "provenance",
    "external",
    "validFrom",
    "validTo",
    "confidence",
    "forgotten",
]
EXTENSIONS = ("valueSalt", "valueCommitment")  # the project's chain commitment keys, not SPEC 1.1
SUBJECTS, PREDICATES, SPACES = (
    ("acct:1", "acct:2", "acct:3"),
    ("plan", "seats"),
    ("org", "team:a", "user:b"),
)
# Canonical JSON (2.5) matters for the digests: 1.0 is "1", 1e21 is "1e+21", index keys come
# first and the rest in UTF-16 order (the astral key before U+FF61).
VALID: list[Any] = ["basic", 7, -3, 0.5, 1.0, 1e21, True, None, [1, "x\t\u2028😀", None]]
VALID += [{"b": 1, "a": 4, "10": 2, "9": 3}, {"nested": {"z": [1, 2], "y": "é"}, "｡": 1, "😀": 2}]
VALUES = [*VALID, {"seats": [1, float("nan")]}, 2**53, float("-inf")]  # the last three refused
DELTAS = (0, 1, 1, 1000, 86_400_000)  # ms the clock moves before an operation
OFFSETS = (-86_400_000, -1, 0, 1, 86_400_000)
PROVENANCE = ("claimed", "claimed", "attested", "verified")
CONFIDENCE = (None, None, 0.0, 0.5, 1.0, 1.5, -0.1)

# Mostly one of the latest facts (so chains form), sometimes any, rarely (40) an unknown id.
_ref = st.sampled_from([*range(25), *range(25), *range(25, 40), 40])
_time = st.tuples(st.sampled_from(OFFSETS), st.integers(0, 4))  # (offset, form)
_valid_from = st.sampled_from(("now", "sup", "sup", "now", "sup", "sup", "naive")).flatmap(
    lambda base: st.tuples(st.just(base), _time)
)
_assert = st.tuples(
    st.just("assert"),
    st.integers(0, 2),
    st.integers(0, 1),
    st.integers(0, 2),  # subject, predicate, space
    st.sampled_from([*range(len(VALID))] * 3 + [*range(len(VALID), len(VALUES))]),  # mostly valid
    st.sampled_from((0, 0, 0, 1, 2)),  # provenance: mostly claimed
    st.one_of(st.none(), _valid_from),
    st.one_of(st.none(), st.sampled_from([0] * 20 + [*range(1, 40), 40])),  # supersedes: the newest
    st.sampled_from((True, True, True, False)),  # a replacement keeps subject and predicate
    st.sampled_from(("new",) * 5 + ("generated",) * 4 + ("duplicate",)),
    st.sampled_from((0,) * 18 + (2, 3, 4, 5, 6)),  # confidence: mostly None, rarely invalid
    st.booleans(),  # validate_assert first
)
_others = {
    "retract": st.tuples(
        st.just("retract"), st.sampled_from([1] * 20 + [*range(40), 40])
    ),  # the middle
    "confirm": st.tuples(st.just("confirm"), _ref),
    "forget": st.tuples(st.just("forget"), _ref, st.booleans()),
    "hold": st.tuples(st.just("hold"), _ref),
    "release": st.tuples(st.just("release"), _ref),
    "sweep": st.tuples(
        st.just("sweep"),
        st.one_of(
            st.tuples(st.sampled_from((-86_400_000, -1000, -1, 0, 1)), st.integers(0, 4)),
            st.tuples(st.just("tx"), _ref),
        ),
        st.one_of(st.none(), st.integers(0, 2)),
        st.booleans(),
    ),
    "badread": st.tuples(
        st.just("badread"), st.sampled_from(("valid_at", "tx_at")), st.integers(0, 1)
    ),
}
_KINDS = (
    ("assert",) * 9
    + ("retract",) * 3
    + ("confirm",) * 2
    + ("forget", "forget", "hold", "hold", "release", "release", "sweep", "badread")
)
_op = st.tuples(
    st.sampled_from(DELTAS),
    st.sampled_from(_KINDS).flatmap(lambda kind: _assert if kind == "assert" else _others[kind]),
)
_first = st.tuples(st.sampled_from(DELTAS), _assert.map(lambda a: (*a[:7], None, *a[8:])))
_case = st.tuples(
    st.builds(
        lambda a, b: a + b,
        st.lists(_first, min_size=2, max_size=3),
        st.lists(_op, min_size=10, max_size=40),
    ),
    st.booleans(),  # a forget key (hmac-sha256 digests)
)


def time_arg(at: int, form: int) -> Any:
    """Instant ``at`` (ms) in one of the accepted spellings; forms 3-4 carry sub-millisecond
    digits the ledger must drop."""
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=at)
    if form == 0:
        return wire(at)
    if form == 1:
        return moment.astimezone(timezone(timedelta(hours=2))).isoformat()
    if form == 2:
        return moment.astimezone(timezone(timedelta(hours=-5, minutes=-30)))
    return (moment + timedelta(microseconds=777)).astimezone(timezone(timedelta(hours=form)))


def strip(data: Any) -> Any:
    """A wire dict without what is random or the project's own extension keys."""
    if isinstance(data, dict):
        return {k: strip(v) for k, v in data.items() if k not in ("eventId", "chain", *EXTENSIONS)}
    if isinstance(data, list):
        return [strip(v) for v in data]
    return data


def same(actual: Any, expected: Any, what: str) -> None:
    """Equal, and every fact dict in SPEC 1.1 key order."""
    assert strip(actual) == expected, f"{what}:\n ledger {strip(actual)}\n model  {expected}"
    for item in actual if isinstance(actual, list) else [actual]:
        fact = item.get("fact", item) if isinstance(item, dict) else None
        if isinstance(fact, dict) and "factId" in fact and "subject" in fact:
            keys = [k for k in fact if k not in EXTENSIONS]
            assert keys == [k for k in FACT_KEYS if k in keys], f"{what}: key order {keys}"


def outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        result = call()
    except (LedgerError, Refused) as error:
        if error.code == "invalid_argument":  # the SPEC fixes the field, not the text
            return "refused", ("invalid_argument", error.field)
        return "refused", (str(error), error.code)
    if hasattr(result, "forgotten") and hasattr(result, "held"):  # a SweepResult
        return "ok", {"forgotten": dicts(result.forgotten), "held": result.held}
    return "ok", dicts(result)


def dicts(result: Any) -> Any:
    if isinstance(result, list) or hasattr(result, "__next__"):  # export() is an iterator
        return [dicts(r) for r in result]
    return result.to_dict() if hasattr(result, "to_dict") else result


class Run:
    """One ledger and one model, driven together by one clock."""

    def __init__(self, ledger: Ledger, model: SpecModel, clock: StepClock) -> None:
        self.ledger, self.model, self.clock = ledger, model, clock
        self.ids: list[str] = []
        self.serial = 0

    @property
    def now(self) -> int:
        return ms(self.clock.now)

    def ref(self, i: int) -> str:
        if not self.ids or i == 40:
            return "00000000-0000-4000-8000-000000000000"
        if i < 25 and len(self.ids) >= 3:
            return self.ids[-(i % 3) - 1]
        return self.ids[i % len(self.ids)]

    def both(self, method: str, *args: Any, **kw: Any) -> tuple[str, Any]:
        """``method`` on the ledger and on the model: the same outcome, facts in wire order."""
        got = outcome(lambda: getattr(self.ledger, method)(*args, **kw))
        want = outcome(lambda: getattr(self.model, method)(*args, **kw))
        what = f"{method}({', '.join(map(repr, args))}, {kw})"
        assert got[0] == want[0], f"{what}: ledger {got} but model {want}"
        if got[0] == "refused":
            assert got[1] == want[1], f"{what}: ledger refused {got[1]}, model {want[1]}"
        else:
            same(got[1], want[1], what)
        return got

    def apply(self, op: tuple[Any, ...]) -> None:
        self.clock.advance(milliseconds=op[0])
        kind, args = op[1][0], op[1][1:]
        by = {"actor": f"agent-{kind}", "receipt_id": "r-1" if self.serial % 2 else None}
        self.serial += 1
        if kind == "assert":
            self.assert_fact(args, by)
        elif kind == "confirm":
            self.both("confirm", fact_id=self.ref(args[0]), **by)
        elif kind in ("retract", "hold", "release"):
            self.both(kind, fact_id=self.ref(args[0]), reason=f"why {kind}", **by)
        elif kind == "forget":
            self.both("forget", fact_id=self.ref(args[0]), reason="x", keep_digest=args[1], **by)
        elif kind == "sweep":
            (when, offset), space, keep = args
            if when == "tx":  # exactly at an assert's transaction time: that one is not before
                learned = [e.tx for e in self.model.events if e.fact_id == self.ref(offset)]
                before = time_arg(learned[0] if learned else self.now, 0)
            else:
                before = time_arg(self.now + when, offset)
            where = None if space is None else SPACES[space]
            self.both("learned_before", before, where)
            self.both("sweep", before=before, space=where, reason="t", keep_digest=keep, **by)
        else:  # a naive time is refused, naming the parameter
            self.both("as_of", **{args[0]: "2026-09-01T00:00:00" if args[1] else NAIVE})

    def assert_fact(self, args: tuple[Any, ...], by: dict[str, Any]) -> None:
        subj, pred, space, value, prov, valid, sup, keep, id_mode, conf, validate = args
        supersedes = self.ref(sup) if sup is not None else None
        subject, predicate = SUBJECTS[subj], PREDICATES[pred]
        old = self.model.get(supersedes) if supersedes else None
        if old is not None and keep:
            subject, predicate = old["subject"], old["predicate"]
        valid_from = None
        if valid is not None:
            base, (offset, form) = valid
            sup_from = base == "sup" and old is not None
            anchor = ms(datetime.fromisoformat(old["validFrom"])) if sup_from else self.now  # type: ignore[index]
            valid_from = time_arg(anchor + offset, form)
            if base == "naive":  # no offset: refused, naming valid_from
                valid_from = wire(anchor)[:-1] if form % 2 else NAIVE
        fact_id = None
        if id_mode == "new":
            fact_id = f"{len(self.ids):08x}-0000-4000-8000-{self.serial:012x}"
        elif id_mode == "duplicate" and self.ids:
            fact_id = self.ref(sup or 0)
        kw = {**by, "subject": subject, "predicate": predicate, "value": VALUES[value]}
        kw.update(space=SPACES[space], provenance=PROVENANCE[prov], valid_from=valid_from)
        kw.update(confidence=CONFIDENCE[conf], supersedes=supersedes, fact_id=fact_id)
        if validate and fact_id is not None:  # (a generated id cannot collide)
            got = outcome(lambda: self.ledger.validate_assert(**kw))
            want = outcome(lambda: self.model.assert_fact(**kw, write=False))
            same_refusal = got[1] == want[1] if got[0] == "refused" else True
            assert got[0] == want[0] and same_refusal, f"validate_assert({kw}): {got}, {want}"
        got = outcome(lambda: self.ledger.assert_fact(**kw))
        if got[0] == "ok":  # the model takes the ledger's id when it chose one
            new_id = got[1]["fact"]["factId"]
            assert new_id == (fact_id or new_id) and UUID4.match(fact_id or new_id), new_id
            assert UUID4.match(got[1]["eventId"]), got[1]["eventId"]
            kw["fact_id"] = new_id
            self.ids.append(new_id)
        want = outcome(lambda: self.model.assert_fact(**kw))
        assert got[0] == want[0], f"assert_fact({kw}): ledger {got}, model {want}"
        if got[0] == "refused":
            assert got[1] == want[1], f"assert_fact({kw}): ledger {got}, model {want}"
        else:
            same(got[1], want[1], "assert_fact")

    def check_all(self) -> None:
        """Every read, at every interesting bitemporal point (before the first event too)."""
        m = self.model
        txs = sorted({e.tx for e in m.events})
        valids = sorted({e.fact["validFrom"] for e in m.events if e.fact} | {self.now})
        tx_points = sorted({t + d for t in txs for d in (-1, 0)} | {self.now + 86_400_000})
        valid_points = sorted({v + d for v in valids for d in (-1, 0)})
        for i, tx in enumerate(tx_points):
            for j, valid in enumerate(valid_points):
                self.both("as_of", valid_at=time_arg(valid, (i + j) % 5), tx_at=time_arg(tx, i % 5))
            for include in ("attested", "verified"):
                self.both("as_of", tx_at=wire(tx), include=include)
            for space in (None, *SPACES):
                self.both("learned_before", wire(tx), space)
        for key, names in (("space", SPACES), ("subject", SUBJECTS), ("predicate", PREDICATES)):
            for name in names:
                for tx in tx_points[:: max(1, len(tx_points) // 4)]:
                    self.both("as_of", **{key: name}, tx_at=wire(tx), valid_at=wire(valids[-1]))
        for fact_id in [*self.ids, self.ref(40)]:
            self.both("get", fact_id)
            self.both("history", fact_id)
            self.both("held", fact_id)
        for method in ("facts", "export", "spaces", "count"):
            self.both(method)


def drive(open_ledger: Callable[[StepClock, str | None], Ledger], case: Case) -> Run:
    ops, keyed = case
    key = "forget-key" if keyed else None
    clock = StepClock(step=timedelta(0))  # moved only between operations
    run = Run(open_ledger(clock, key), SpecModel(clock, forget_key=key), clock)
    run.both("as_of")  # empty: nothing before the first event
    for op in ops:
        run.apply(op)
        run.both("as_of")
        run.both("count")
    run.check_all()
    return run


_settings = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))


@_settings
@given(_case)
def test_memory_ledger_matches_the_spec_model(case: Case) -> None:
    drive(lambda clock, key: Ledger("memory:", clock=clock, forget_key=key), case)


@settings(_settings, max_examples=max(5, EXAMPLES // 8))
@given(_case)
def test_jsonl_ledger_matches_the_spec_model_and_reopens_the_same(case: Case) -> None:
    drive_and_reopen("ledger.jsonl", case)


def drive_and_reopen(name: str, case: Case) -> None:
    """``drive`` on a ledger file ``name`` in a fresh folder, then every check again on the
    ledger reopened (its indexes rebuilt from what it stored)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        drive_reopened(lambda clock, key: Ledger(path, clock=clock, forget_key=key), case)


def drive_reopened(open_ledger: Callable[[StepClock, str | None], Ledger], case: Case) -> Run:
    """``drive`` on the ledger ``open_ledger`` opens, then every check again on a second ledger
    it opens on the same storage; both closed on return, also when a check fails (the plugins'
    model tests use it too: a SQLite file or a PostgreSQL table)."""
    opened: list[Ledger] = []

    def tracked(clock: StepClock, key: str | None) -> Ledger:
        opened.append(open_ledger(clock, key))
        return opened[-1]

    try:
        run = drive(tracked, case)
        run.ledger.close()
        run.ledger = tracked(run.clock, run.model.forget_key)
        run.check_all()
    finally:
        for ledger in opened:
            ledger.close()
    return run


@pytest.mark.parametrize(
    ("kw", "text"),
    [
        ({"value": {"seats": [1, float("nan")]}}, "value.seats[1]: NaN is not JSON"),
        ({"value": 1, "confidence": 1.5}, "confidence must be between 0 and 1"),
    ],
)
def test_the_spec_texts_for_values(kw: dict[str, Any], text: str) -> None:
    """Where SPEC 2.1 fixes the text, the ledger and the model give exactly it."""
    clock = StepClock()
    model, base = SpecModel(clock), dict[str, Any](subject="s", predicate="p", space="o", actor="a")
    with Ledger("memory:", clock=clock) as ledger, pytest.raises(LedgerError) as refused:
        ledger.assert_fact(**base, **kw)
    assert str(refused.value) == text
    with pytest.raises(Refused) as expected:
        model.assert_fact(**base, **kw)
    assert str(expected.value) == text


@pytest.mark.parametrize("bad", ["2026-09-01T00:00:00", NAIVE, "yesterday"])
def test_a_time_without_offset_is_refused_naming_the_parameter(bad: Any) -> None:
    with Ledger("memory:") as ledger, pytest.raises(LedgerError) as refused:
        ledger.assert_fact(
            subject="s", predicate="p", value=1, space="o", actor="a", valid_from=bad
        )
    assert "valid_from" in str(refused.value) and refused.value.field == "valid_from"

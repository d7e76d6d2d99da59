"""The property-based rule: random histories give the same answers as the reference backend.

Hypothesis draws sequences of assert (with and without supersedes), retract, confirm, forget,
hold and release; each is applied to a ledger on the backend under test and to one on the
in-memory reference, with identical clocks and fact ids. Every outcome (the event, or the refusal
text) and every read afterwards (as_of at several bitemporal points, history, export, spaces,
learned_before) must agree. ``AGENT_CUSTODY_PROPERTY_EXAMPLES`` raises the example count (the
stress session sets it).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.backends.memory import MemoryBackend
from agent_custody_state.ledger.backend import EventBackend

from .clock import StepClock
from .rules import rule

EXAMPLES = int(os.environ.get("AGENT_CUSTODY_PROPERTY_EXAMPLES", "25"))

_ref = st.integers(min_value=0, max_value=40)
_assert = st.tuples(
    st.just("assert"),
    st.integers(0, 2),
    st.integers(-5, 5),
    st.one_of(st.none(), _ref, _ref),
    st.integers(0, 3),
    st.integers(0, 4),
)
_op = st.one_of(
    _assert,
    _assert,
    _assert,
    st.tuples(st.just("retract"), _ref),
    st.tuples(st.just("confirm"), _ref),
    st.tuples(st.just("forget"), _ref, st.booleans()),
    st.tuples(st.just("hold"), _ref),
    st.tuples(st.just("release"), _ref),
)


_RANDOM = ("eventId", "valueSalt", "valueCommitment")


def _strip(data: Any) -> Any:
    """Event and fact dicts without what is random (event ids, chain salts, and so hashes):
    the chain record keeps its position and genesis size."""
    if isinstance(data, dict):
        out = {k: _strip(v) for k, v in data.items() if k not in _RANDOM}
        if isinstance(data.get("chain"), dict):
            chain = data["chain"]
            out["chain"] = {"seq": chain.get("seq"), "genesis": "genesis" in chain}
        return out
    if isinstance(data, list):
        return [_strip(v) for v in data]
    return data


def _apply(ledger: Ledger, op: tuple[Any, ...], facts: list[str], n: int) -> Any:
    kind = op[0]

    def ref(i: int) -> str:
        # Mostly the latest facts (so chains form), sometimes any fact or an unknown id.
        if not facts or i == 40:
            return "unknown-fact"
        return facts[-(i % 3) - 1] if i < 25 and len(facts) >= 3 else facts[i % len(facts)]

    try:
        if kind == "assert":
            _, subj, value, sup, provenance, keep_subject = op
            sup_id = ref(sup) if sup is not None else None
            subject = f"s{subj}"
            if sup_id is not None and keep_subject and (target := ledger.get(sup_id)):
                subject = target.subject  # mostly a valid replacement, sometimes not
            event = ledger.assert_fact(
                subject=subject,
                predicate="p",
                value=value,
                space=f"sp{subj % 2}",
                actor="a",
                fact_id=f"f{n}",
                supersedes=sup_id,
                provenance=("claimed", "claimed", "attested", "verified")[provenance],
                valid_from=f"2026-09-01T00:00:{n % 60:02d}.000Z",
            )
            facts.append(event.fact_id)
            return _strip(event.to_dict())
        fact_id = ref(op[1])
        if kind == "forget":
            return _strip(
                ledger.forget(fact_id=fact_id, actor="a", reason="r", keep_digest=op[2]).to_dict()
            )
        if kind == "confirm":
            return _strip(ledger.confirm(fact_id=fact_id, actor="a").to_dict())
        method = getattr(ledger, kind)
        return _strip(method(fact_id=fact_id, actor="a", reason="r").to_dict())
    except LedgerError as exc:
        return f"refused: {exc}"


def _reads(ledger: Ledger, facts: list[str], times: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "export": _strip([e.to_dict() for e in ledger.export()]),
        "spaces": ledger.spaces(),
        "count": ledger.count(),
        "history": {f: _strip([e.to_dict() for e in ledger.history(f)]) for f in facts},
        "get": {f: _strip(ledger.get(f).to_dict()) for f in facts},  # type: ignore[union-attr]
        "held": {f: ledger.held(f) for f in facts},
    }
    for tx in times:
        for valid in (
            "2026-09-01T00:00:03.000Z",
            "2026-09-01T00:00:09.500Z",
            "2026-09-01T00:00:21.000Z",
            "2026-09-01T00:00:59.000Z",
        ):
            for include in ("all", "attested"):
                key = f"as_of {tx} {valid} {include}"
                out[key] = [
                    _strip(f.to_dict())
                    for f in ledger.as_of(tx_at=tx, valid_at=valid, include=include)
                ]
        out[f"learned {tx}"] = [_strip(f.to_dict()) for f in ledger.learned_before(tx)]
    out["as_of s0"] = [_strip(f.to_dict()) for f in ledger.as_of(subject="s0", space="sp0")]
    return out


class PropertyChecks:
    """Mixin for ``EventBackendConformance``: the Hypothesis comparison with the reference."""

    # Protected like every other rule: a subclass may replace it only with an xfail.
    __suite_root__ = True

    @rule("EB-PROP")
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.differing_executors,
            HealthCheck.too_slow,
        ],
    )
    @given(ops=st.lists(_op, min_size=1, max_size=40))
    def test_matches_reference(
        self, store_factory: Callable[..., EventBackend], ops: list[tuple[Any, ...]]
    ) -> None:
        """Random operation sequences give identical outcomes and reads on the backend under
        test and on the in-memory reference.

        Troubleshooting: Hypothesis prints the shortest failing sequence; replay it by hand on
        both ledgers and compare ``export()`` first, then the first read that differs.
        """
        name = f"prop_{uuid.uuid4().hex[:12]}"
        clock_a, clock_b = StepClock(), StepClock()
        with (
            Ledger(store_factory(name), clock=clock_a) as tested,
            Ledger(MemoryBackend(), clock=clock_b) as reference,
        ):
            facts_a: list[str] = []
            facts_b: list[str] = []
            times: list[str] = []
            for n, op in enumerate(ops):
                got = _apply(tested, op, facts_a, n)
                want = _apply(reference, op, facts_b, n)
                assert got == want, f"operation {n} {op} differs"
                times.append(tested.now())
                reference.now()
            sample = [*times[:: max(1, len(times) // 4)], tested.now()]
            reference.now()
            assert _reads(tested, facts_a, sample) == _reads(reference, facts_b, sample)


__all__ = ["PropertyChecks"]

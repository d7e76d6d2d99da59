"""Review of sweeps against holds, the transaction-time boundary, retention precedence, and the
mirror's put-back racing a sweep (SPEC 2.6-2.8, 6)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

from agent_custody_state import AssertRequest, Ledger, RetentionPolicy
from agent_custody_state.ledger.model import Fact
from agent_custody_state.stores import StoreSet, VerifyPolicy
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def rows(store: InProcessStore) -> dict[str, Any]:
    return {r["metadata"]["factId"]: r["value"] for r in store.vendor.rows.values()}


def plan(value: Any, **more: Any) -> AssertRequest:
    return AssertRequest(
        subject="acct:42", predicate="plan", value=value, space="org", actor="agent", **more
    )


def test_a_hold_committed_while_the_sweep_runs_keeps_the_fact(tmp_path: Path) -> None:
    clock = Clock()
    with Ledger(tmp_path / "l.jsonl", clock=clock) as ledger:
        ids = [
            ledger.assert_fact(
                subject=f"s{i}", predicate="p", value=i, space="org", actor="a"
            ).fact.fact_id
            for i in range(3)
        ]
        clock.now = T0 + timedelta(days=10)

        def progress(done: int, total: int) -> None:
            if done == 0:
                ledger.hold(fact_id=ids[1], actor="legal", reason="litigation")

        result = ledger.sweep(before=clock.now, actor="a", reason="r", progress=progress)
        assert [e.fact_id for e in result.forgotten] == [ids[0], ids[2]]
        assert result.held == [ids[1]]
        assert ledger.get(ids[1]).value == 1  # type: ignore[union-attr]


def test_the_cutoff_is_transaction_time_and_exclusive(tmp_path: Path) -> None:
    clock = Clock()
    with Ledger(tmp_path / "l.jsonl", clock=clock) as ledger:
        old_valid = ledger.assert_fact(
            subject="a",
            predicate="p",
            value=1,
            space="org",
            actor="a",
            valid_from="2000-01-01T00:00:00Z",
        ).fact.fact_id
        clock.now = T0 + timedelta(days=1)
        at_cutoff = ledger.assert_fact(
            subject="b", predicate="p", value=2, space="org", actor="a"
        ).fact.fact_id
        result = ledger.sweep(before="2026-01-02T01:00:00+01:00", actor="a", reason="r")
        assert [e.fact_id for e in result.forgotten] == [old_valid]
        assert ledger.get(at_cutoff).value == 2  # type: ignore[union-attr]


def test_the_most_specific_retention_pattern_wins() -> None:
    policy = RetentionPolicy.parse("*=P1Y,team:*=P90D,team:support=P7D,team:sup*=P30D")
    assert policy is not None
    assert policy.window_for("team:support")[0] == "team:support"  # type: ignore[index]
    assert policy.window_for("team:supply")[0] == "team:sup*"  # type: ignore[index]
    assert policy.window_for("team:x")[0] == "team:*"  # type: ignore[index]
    assert policy.window_for("team")[0] == "*"  # type: ignore[index]
    only_team = RetentionPolicy.parse("team:*=P90D")
    assert only_team is not None and only_team.window_for("org") is None


def _chain(ledger: Ledger, custody: Custody, clock: Clock) -> tuple[str, str]:
    """A (old) superseded by B (recent): A has left the stores, B is there."""
    a = anyio.run(custody.write, plan("old")).event.fact.fact_id
    clock.now = T0 + timedelta(days=30)
    b = anyio.run(custody.write, plan("new", supersedes=a)).event.fact.fact_id
    return a, b


def test_a_put_back_racing_a_sweep_does_not_leave_the_erased_value_in_a_store(
    tmp_path: Path,
) -> None:
    """A retraction of B puts A back; a sweep forgets A between the put-back and the ledger's
    retraction (the restore is recorded after the forget): the copy put back must go."""
    clock = Clock()
    swept: list[str] = []

    class Racing(InProcessStore):
        sweep_on_put = False

        async def put(self, fact: Fact) -> str:
            if self.sweep_on_put:
                self.sweep_on_put = False
                report = await other.sweep(before=T0 + timedelta(days=1), actor="r", reason="r")
                swept.extend(s.event.fact_id for s in report.forgotten)
            return await super().put(fact)

    store = Racing("vectors")
    with Ledger(tmp_path / "l.jsonl", clock=clock) as ledger:
        stores = StoreSet([store], VerifyPolicy(attempts=1, delay=0))
        custody, other = Custody(ledger, stores), Custody(ledger, stores)
        a, b = _chain(ledger, custody, clock)
        assert rows(store) == {b: "new"}
        store.sweep_on_put = True
        anyio.run(lambda: custody.retract(fact_id=b, actor="x", reason="wrong"))
        assert swept == [a]
        assert ledger.get(a).forgotten is not None  # type: ignore[union-attr]
        assert rows(store) == {}, "the erased value of A was put back and stayed"


def test_a_restore_committed_after_the_sweep_listed_its_facts_is_removed(
    tmp_path: Path,
) -> None:
    """Another process retracts B (putting A back, recorded on its event) after the sweep
    listed A's stores but before it forgot A: the sweep must remove the copy put back."""
    clock = Clock()
    store = InProcessStore("vectors")
    with Ledger(tmp_path / "l.jsonl", clock=clock) as ledger:
        stores = StoreSet([store], VerifyPolicy(attempts=1, delay=0))
        custody = Custody(ledger, stores)
        a, b = _chain(ledger, custody, clock)
        restored: list[str] = []

        def progress(stage: str, done: int, total: int) -> None:
            if stage == "ledger" and not restored:
                fact = ledger.get(a)
                assert fact is not None and fact.value == "old"
                new_id = store.vendor.insert(
                    {"text": "", "value": fact.value, "metadata": {"factId": a}}
                )
                restored.append(new_id)
                ledger.retract(
                    fact_id=b,
                    actor="x",
                    reason="wrong",
                    extra={"restored": {"factId": a, "external": {"vectors": new_id}}},
                )

        report = anyio.run(
            lambda: custody.sweep(
                before=T0 + timedelta(days=1), actor="r", reason="r", progress=progress
            )
        )
        assert [s.event.fact_id for s in report.forgotten] == [a]
        assert restored and ledger.current_external(a)["vectors"] == restored[0]
        assert a not in rows(store), "the copy put back before the forget stayed in the store"
        assert report.problems() == []

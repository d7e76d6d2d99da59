"""The custody flows without MCP: what a Python program gets from ``Custody`` (SPEC 4.2, 6).

Two stores from the builtin reference store type (their vendor rows read directly, the way a
conformance backdoor reads a vendor), a ledger on the in-memory backend or a JSONL file, and no
server: every outcome the memory server reports comes from these reports.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state import AssertRequest, Ledger, LedgerError, RetentionPolicy
from agent_custody_state.stores import StoreSet, StoreWriteError, VerifyPolicy
from agent_custody_state.stores.flows import SWEEP_NEEDS_BEFORE, Custody
from agent_custody_state.stores.inprocess import InProcessStore, MemoryVendor


def rows(store: InProcessStore) -> dict[str, Any]:
    """fact id -> value, read from the vendor's own rows."""
    return {r["metadata"]["factId"]: r["value"] for r in store.vendor.rows.values()}


def plan(value: Any, **more: Any) -> AssertRequest:
    return AssertRequest(
        subject="acct:42", predicate="plan", value=value, space="org", actor="agent", **more
    )


@pytest.fixture
def two_stores() -> StoreSet:
    return StoreSet(
        [InProcessStore("vectors"), InProcessStore("graph")], VerifyPolicy(attempts=2, delay=0)
    )


def test_write_reaches_every_store_in_order_and_the_ledger_records_the_ids(
    two_stores: StoreSet,
) -> None:
    async def scenario() -> None:
        with Ledger("memory:") as ledger:
            custody = Custody(ledger, two_stores)
            report = await custody.write(plan("pro"))
            fact = report.event.fact
            assert set(fact.external or {}) == {"vectors", "graph"}
            for store in two_stores:
                assert rows(store) == {fact.fact_id: "pro"}  # type: ignore[arg-type]
            assert ledger.get(fact.fact_id) == fact
            assert report.mirror is None  # nothing superseded

    anyio.run(scenario)


def test_a_refusing_store_fails_the_write_and_the_others_are_compensated(
    two_stores: StoreSet,
) -> None:
    async def scenario() -> None:
        vectors, graph = two_stores.stores
        graph.vendor.fail = True  # type: ignore[attr-defined]
        with Ledger("memory:") as ledger:
            with pytest.raises(StoreWriteError) as caught:
                await Custody(ledger, two_stores).write(plan("pro"))
            assert caught.value.store == "graph"
            assert caught.value.compensation["vectors"] == "removed"
            assert "compensated: vectors: removed, graph: may hold a copy" in str(caught.value)
            assert rows(vectors) == {} and ledger.count() == 0  # type: ignore[arg-type]

    anyio.run(scenario)


def test_a_ledger_refusal_after_the_puts_compensates_them(two_stores: StoreSet) -> None:
    """Validation passed, the stores were written, then another writer superseded the same
    fact first: the append is refused and the puts are undone, named in the message."""

    async def scenario() -> None:
        with Ledger("memory:") as ledger:
            first = ledger.assert_fact(
                subject="acct:42", predicate="plan", value="free", space="org", actor="a"
            )

            async def racing_append(request: AssertRequest) -> Any:
                ledger.assert_fact(
                    subject="acct:42",
                    predicate="plan",
                    value="rival",
                    space="org",
                    actor="b",
                    supersedes=first.fact_id,
                )
                return ledger.assert_fact(request)

            custody = Custody(ledger, two_stores, append=racing_append)
            with pytest.raises(
                LedgerError,
                match="already superseded; compensated: graph: removed, vectors: removed",
            ) as caught:
                await custody.write(plan("pro", supersedes=first.fact_id))
            assert caught.value.code == "already_superseded"
            for store in two_stores:
                assert rows(store) == {}  # type: ignore[arg-type]

    anyio.run(scenario)


def test_supersede_retract_forget_keep_the_stores_mirroring_the_present(
    two_stores: StoreSet,
) -> None:
    async def scenario() -> None:
        vectors = two_stores.stores[0]
        with Ledger("memory:") as ledger:
            custody = Custody(ledger, two_stores)
            pro = (await custody.write(plan("pro"))).event
            ent = await custody.write(plan("enterprise", supersedes=pro.fact_id))
            assert ent.mirror is not None
            assert ent.mirror.verification == {"vectors": "verified", "graph": "verified"}
            assert rows(vectors) == {ent.event.fact_id: "enterprise"}  # type: ignore[arg-type]
            undo = await custody.retract(fact_id=ent.event.fact_id, actor="ops", reason="wrong")
            assert undo.removal.removed_from == ["vectors", "graph"]
            assert undo.restored is not None and undo.restored.fact_id == pro.fact_id
            assert rows(vectors) == {pro.fact_id: "pro"}  # type: ignore[arg-type]
            assert ledger.current_external(pro.fact_id) == undo.restored.external
            gone = await custody.forget(fact_id=pro.fact_id, actor="dpo", reason="GDPR")
            assert gone.event.value_digest is not None
            assert gone.removal.verification == {"vectors": "verified", "graph": "verified"}
            assert rows(vectors) == {}  # type: ignore[arg-type]

    anyio.run(scenario)


def test_sweep_by_retention_window_reaches_the_stores(tmp_path: Path) -> None:
    async def scenario() -> None:
        vendor = MemoryVendor()
        stores = StoreSet([InProcessStore("vectors", vendor)], VerifyPolicy(attempts=1, delay=0))
        retention = RetentionPolicy.parse("org=P1D")
        clock_at = ["2026-01-01T00:00:00Z"]
        from agent_custody_state.timeutil import parse_time

        with Ledger(tmp_path / "l.jsonl", clock=lambda: parse_time(clock_at[0])) as ledger:
            custody = Custody(ledger, stores, retention=retention)
            old = (await custody.write(plan("old"))).event
            kept = (
                await custody.write(
                    AssertRequest(
                        subject="acct:7", predicate="plan", value="kept", space="team", actor="a"
                    )
                )
            ).event
            held = (
                await custody.write(
                    AssertRequest(
                        subject="acct:9", predicate="plan", value="held", space="org", actor="a"
                    )
                )
            ).event
            ledger.hold(fact_id=held.fact_id, actor="legal", reason="case 7")
            clock_at[0] = "2026-01-03T00:00:00Z"
            report = await custody.sweep(actor="cron", reason="retention")
            assert [s.event.fact_id for s in report.forgotten] == [old.fact_id]
            assert report.forgotten[0].removal.verification == {"vectors": "verified"}
            assert report.held == [held.fact_id] and report.still_held == []
            assert report.before is None and report.retention is retention
            assert set(rows(InProcessStore("x", vendor))) == {kept.fact_id, held.fact_id}
        assert b'"old"' not in (tmp_path / "l.jsonl").read_bytes()

    anyio.run(scenario)


def test_sweep_without_before_or_retention_is_refused() -> None:
    async def scenario() -> None:
        with Ledger("memory:") as ledger:
            with pytest.raises(LedgerError, match="sweep needs `before`") as caught:
                await Custody(ledger).sweep(actor="a", reason="r")
            assert str(caught.value) == SWEEP_NEEDS_BEFORE and caught.value.field == "before"

    anyio.run(scenario)


def test_a_store_that_cannot_remove_is_reported_not_hidden(two_stores: StoreSet) -> None:
    async def scenario() -> None:
        vectors, graph = two_stores.stores
        with Ledger("memory:") as ledger:
            custody = Custody(ledger, two_stores)
            fact = (await custody.write(plan("pro"))).event
            graph.vendor.fail = True  # type: ignore[attr-defined]
            report = await custody.sweep(before="2999-01-01T00:00:00Z", actor="a", reason="r")
            assert report.still_held == [fact.fact_id]
            assert report.problems() == [
                f"graph ({fact.fact_id}): memory vendor unavailable during delete"
            ]
            assert rows(vectors) == {}  # type: ignore[arg-type]

    anyio.run(scenario)

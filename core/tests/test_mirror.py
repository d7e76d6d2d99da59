"""Stores mirror the present: supersession removes, retraction puts back, the ledger records it.

Run on the builtin in-memory reference store, whose vendor rows are read directly (a backdoor),
and an in-memory ledger. Ledger calls run inline; the server runs the same flows on its worker.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.backends.memory import MemoryBackend
from agent_custody_state.ledger.model import AssertEvent, Fact
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.stores import StoreSet, StoreWriteError, VerifyPolicy
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore, MemoryVendor
from agent_custody_state.stores.mirror import current_fact


def held_facts(vendor: MemoryVendor) -> dict[str, Any]:
    """fact id -> value, straight from the vendor's rows."""
    return {r["metadata"]["factId"]: r["value"] for r in vendor.rows.values()}


class World:
    """A ledger, a mirroring store and an append-only store, moved by the custody flows."""

    def __init__(self) -> None:
        self.ledger = Ledger(MemoryBackend("memory:"))
        self.mirror = InProcessStore("mirror")
        self.log = InProcessStore("log")
        self.stores = StoreSet(
            [self.mirror, self.log], VerifyPolicy(attempts=2, delay=0), append_only={"log"}
        )

    @property
    def custody(self) -> Custody:
        return Custody(self.ledger, self.stores)

    async def write(self, value: Any, supersedes: str | None = None) -> AssertEvent:
        # What memory.write does: put everywhere, append with the ids, mirror the supersession.
        report = await self.custody.write(
            AssertRequest(
                subject="acct:42",
                predicate="plan",
                value=value,
                space="org",
                actor="agent",
                supersedes=supersedes,
            )
        )
        self.superseded = report.mirror
        return report.event

    def mirrored(self) -> dict[str, Any]:
        return held_facts(self.mirror.vendor)

    def logged(self) -> dict[str, Any]:
        return held_facts(self.log.vendor)


@pytest.fixture
def world() -> Iterator[World]:
    w = World()
    yield w
    w.ledger.close()


def run(coro_fn: Any, *args: Any) -> Any:
    return anyio.run(coro_fn, *args)


def test_supersession_swaps_the_value_in_mirroring_stores(world: World) -> None:
    async def scenario() -> None:
        a = await world.write("pro")
        assert world.superseded is None
        b = await world.write("enterprise", supersedes=a.fact_id)
        assert world.superseded is not None
        assert world.superseded.removed_from == ["mirror"]
        assert world.superseded.verification == {"mirror": "verified"}
        assert world.mirrored() == {b.fact_id: "enterprise"}
        assert world.logged() == {a.fact_id: "pro", b.fact_id: "enterprise"}

    run(scenario)


def test_retracting_the_head_puts_the_previous_value_back(world: World) -> None:
    async def scenario() -> None:
        a = await world.write("pro")
        b = await world.write("enterprise", supersedes=a.fact_id)
        old_id = a.fact.external["mirror"]
        out = await Custody(world.ledger, world.stores).retract(
            fact_id=b.fact_id, actor="x", reason="wrong plan"
        )
        assert world.mirrored() == {a.fact_id: "pro"}
        # The append-only store lost the retracted value but got nothing back.
        assert world.logged() == {a.fact_id: "pro"}
        assert out.removal.removed_from == ["mirror", "log"]
        assert out.removal.verification == {"mirror": "verified", "log": "verified"}
        assert out.restored is not None and out.restored.failed == {}
        new_id = out.restored.external["mirror"]
        assert new_id != old_id and set(out.restored.external) == {"mirror"}
        # The ledger is the record of where the fact is held now.
        assert out.event.to_dict()["restored"] == {
            "factId": a.fact_id,
            "external": {"mirror": new_id},
        }
        assert world.ledger.current_external(a.fact_id) == {
            "mirror": new_id,
            "log": a.fact.external["log"],
        }
        # ...so forgetting it later reaches the new record, and verifies it.
        gone = await Custody(world.ledger, world.stores).forget(
            fact_id=a.fact_id, actor="x", reason="gdpr"
        )
        assert gone.restored is None
        assert gone.removal.verification == {"mirror": "verified", "log": "verified"}
        assert world.mirrored() == {} and world.logged() == {}

    run(scenario)


def test_middle_of_a_chain_uncovers_nothing_then_the_head_uncovers_the_root(world: World) -> None:
    async def scenario() -> None:
        a = await world.write("free")
        b = await world.write("pro", supersedes=a.fact_id)
        c = await world.write("enterprise", supersedes=b.fact_id)
        middle = await Custody(world.ledger, world.stores).retract(
            fact_id=b.fact_id, actor="x", reason="never true"
        )
        assert middle.restored is None
        assert world.mirrored() == {c.fact_id: "enterprise"}
        head = await Custody(world.ledger, world.stores).retract(
            fact_id=c.fact_id, actor="x", reason="never true"
        )
        assert head.restored is not None and head.restored.fact_id == a.fact_id
        assert world.mirrored() == {a.fact_id: "free"}
        assert [f.value for f in world.ledger.as_of()] == ["free"]

    run(scenario)


def test_forgetting_the_head_puts_the_previous_value_back(world: World) -> None:
    async def scenario() -> None:
        a = await world.write("pro")
        b = await world.write("enterprise", supersedes=a.fact_id)
        out = await Custody(world.ledger, world.stores).forget(
            fact_id=b.fact_id, actor="x", reason="gdpr"
        )
        assert out.restored is not None and out.restored.fact_id == a.fact_id
        assert out.event.to_dict()["restored"]["factId"] == a.fact_id
        assert world.mirrored() == {a.fact_id: "pro"}
        assert "enterprise" not in str(world.mirror.vendor.rows)

    run(scenario)


def test_a_failed_put_back_does_not_block_the_retraction(world: World) -> None:
    async def scenario() -> None:
        a = await world.write("pro")
        b = await world.write("enterprise", supersedes=a.fact_id)
        world.mirror.vendor.fail = True
        out = await Custody(world.ledger, world.stores).retract(
            fact_id=b.fact_id, actor="x", reason="wrong"
        )
        assert world.ledger.is_retracted(b.fact_id)
        assert out.restored is not None
        assert out.restored.external == {}
        assert set(out.restored.failed) == {"mirror"}
        assert "restored" not in out.event.to_dict()  # nothing was put back, nothing recorded
        assert out.removal.still_held == {"mirror": out.removal.still_held["mirror"]}
        assert out.removal.verification["mirror"] == "failed"

    run(scenario)


def test_a_refused_retraction_compensates_the_put_back(world: World) -> None:
    async def scenario() -> None:
        a = await world.write("pro")
        b = await world.write("enterprise", supersedes=a.fact_id)
        calls = 0

        async def racing_run(fn: Any, *args: Any, **kwargs: Any) -> Any:
            # Another caller retracts b between the plan and the append.
            nonlocal calls
            calls += 1
            if calls == 2:
                world.ledger.retract(fact_id=b.fact_id, actor="other", reason="race")
            return fn(*args, **kwargs)

        with pytest.raises(LedgerError, match="already retracted"):
            await Custody(world.ledger, world.stores, run=racing_run).retract(
                fact_id=b.fact_id, actor="x", reason="wrong"
            )
        assert a.fact_id not in world.mirrored()  # the put-back was undone

    run(scenario)


def test_refusals_put_nothing_back(world: World) -> None:
    async def scenario() -> None:
        a = await world.write("pro")
        b = await world.write("enterprise", supersedes=a.fact_id)
        world.ledger.hold(fact_id=b.fact_id, actor="legal", reason="case 7")
        with pytest.raises(LedgerError, match="on legal hold"):
            await Custody(world.ledger, world.stores).forget(
                fact_id=b.fact_id, actor="x", reason="gdpr"
            )
        with pytest.raises(LedgerError, match="unknown fact"):
            await Custody(world.ledger, world.stores).retract(fact_id="nope", actor="x", reason="r")
        assert world.mirrored() == {b.fact_id: "enterprise"}

    run(scenario)


def test_append_only_everywhere_means_no_mirroring(world: World) -> None:
    async def scenario() -> None:
        stores = StoreSet([world.mirror, world.log], append_only={"mirror", "log"})
        world.stores = stores
        a = await world.write("pro")
        b = await world.write("enterprise", supersedes=a.fact_id)
        assert world.superseded is None
        assert set(world.mirrored()) == {a.fact_id, b.fact_id}
        out = await Custody(world.ledger, stores).retract(fact_id=b.fact_id, actor="x", reason="r")
        assert out.restored is None
        assert set(world.mirrored()) == {a.fact_id}

    run(scenario)


def test_store_attribute_mirror_false_is_append_only() -> None:
    store = InProcessStore("plain")
    store.mirror = False  # type: ignore[attr-defined]
    assert StoreSet([store]).mirroring() == []
    with pytest.raises(ValueError, match="unknown stores: ghost"):
        StoreSet([store], append_only={"ghost"})


def test_current_fact_reports_restored_ids(world: World) -> None:
    async def scenario() -> None:
        a = await world.write("pro")
        assert current_fact(world.ledger, a.fact_id).external == a.fact.external  # type: ignore[union-attr]
        assert current_fact(world.ledger, "nope") is None
        assert world.ledger.current_external("nope") == {}

    run(scenario)


# -- the orchestration itself (SPEC 4.2, 4.3) --------------------------------------------------


def test_failing_store_during_write_compensates_earlier_ones() -> None:
    first = InProcessStore("first")
    second = InProcessStore("second", MemoryVendor(fail=True))
    stores = StoreSet([first, second])
    fact = Fact(
        "f1", "acct:42", "plan", "pro", "org", "agent", valid_from="2026-01-01T00:00:00.000Z"
    )

    async def scenario() -> None:
        with pytest.raises(StoreWriteError) as caught:
            await stores.put_all(fact)
        assert caught.value.store == "second"
        assert caught.value.compensation["first"] == "removed"
        assert caught.value.compensation["second"].startswith("may hold a copy (looking it up")
        assert "store second refused the write" in str(caught.value)
        assert first.vendor.rows == {}

    run(scenario)


def test_lagging_index_reports_still_indexed_then_verified() -> None:
    store = InProcessStore("lagging", MemoryVendor(lag_checks=3))
    fact = Fact(
        "f1", "acct:42", "plan", "pro", "org", "agent", valid_from="2026-01-01T00:00:00.000Z"
    )

    async def scenario() -> None:
        ext = await store.put(fact)
        report = await StoreSet([store], VerifyPolicy(attempts=2, delay=0)).remove_all(
            fact.with_(external={"lagging": ext})
        )
        assert report.verification == {"lagging": "stillIndexed"}
        ext = await store.put(fact)
        report = await StoreSet([store], VerifyPolicy(attempts=5, delay=0.001)).remove_all(
            fact.with_(external={"lagging": ext})
        )
        assert report.verification == {"lagging": "verified"}

    run(scenario)

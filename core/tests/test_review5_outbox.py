"""Review of the write-through flows and the outbox: a failure part-way, or a concurrent call,
must not leave a store holding a value the ledger retracted or forgot with nobody to retry it.

Concurrency is staged with gates: a store whose put waits (a slow vendor), and a ``run`` that
waits before the ledger change (the server's ledger thread, busy). Vendor rows are read directly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state import AssertRequest, Ledger
from agent_custody_state.ledger.model import Fact
from agent_custody_state.stores import StoreSet, VerifyPolicy
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore
from agent_custody_state.stores.outbox import Outbox

FAST = VerifyPolicy(attempts=1, delay=0)


class Crash(BaseException):
    """The process dies here."""


class Gate:
    def __init__(self) -> None:
        self.reached = anyio.Event()
        self.go = anyio.Event()

    async def wait(self) -> None:
        self.reached.set()
        await self.go.wait()


class SlowPut(InProcessStore):
    """The reference store; with ``gate`` set, the next put waits at it (a slow vendor)."""

    gate: Gate | None = None

    async def put(self, fact: Fact) -> str:
        if self.gate is not None:
            gate, self.gate = self.gate, None
            await gate.wait()
        return await super().put(fact)


def held(store: InProcessStore) -> dict[str, Any]:
    return {r["metadata"]["factId"]: r["value"] for r in store.vendor.rows.values()}


def request(value: Any, supersedes: str | None = None) -> AssertRequest:
    return AssertRequest(
        subject="acct:42",
        predicate="plan",
        value=value,
        space="org",
        actor="agent",
        supersedes=supersedes,
    )


def waiting_before(gate: Gate, name: str) -> Any:
    """A ``run`` that waits at ``gate`` before calling the function named ``name``."""

    async def run(fn: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(fn, "__name__", "") == name:
            await gate.wait()
        return fn(*args, **kwargs)

    return run


async def chain(custody: Custody) -> tuple[str, str]:
    """F, then G superseding it: the mirroring store holds only G."""
    f = (await custody.write(request("old-secret"))).event.fact_id
    g = (await custody.write(request("new", f))).event.fact_id
    return f, g


def test_an_outbox_that_cannot_record_the_debt_puts_nothing_back(tmp_path: Path) -> None:
    store = InProcessStore("vectors")

    async def scenario() -> None:
        with Ledger(tmp_path / "ledger.jsonl") as ledger:
            custody = Custody(ledger, StoreSet([store], FAST), outbox=tmp_path / "box.outbox")
            _, g = await chain(custody)

            def disk_full(*_: Any, **__: Any) -> Any:
                raise OSError(28, "No space left on device")

            custody.outbox.owe = disk_full  # type: ignore[union-attr,method-assign]
            with pytest.raises(OSError, match="No space"):
                await custody.retract(fact_id=g, actor="ops", reason="wrong")
            assert not ledger.is_retracted(g)
            # The retraction never happened: F stays superseded, and out of the store.
            assert held(store) == {g: "new"}

    anyio.run(scenario)


@pytest.mark.parametrize("leave", ["forget", "retract"])
def test_a_copy_put_back_after_the_plan_leaves_with_the_fact(tmp_path: Path, leave: str) -> None:
    store = SlowPut("vectors")
    stores = StoreSet([store], FAST)

    async def scenario() -> None:
        with Ledger(tmp_path / "ledger.jsonl") as ledger:
            first = Custody(ledger, stores)
            f, g = await chain(first)
            put, change = Gate(), Gate()
            store.gate = put  # retracting G puts F back, slowly
            second = Custody(ledger, stores, run=waiting_before(change, "mutate"))
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: first.retract(fact_id=g, actor="ops", reason="wrong"))
                await put.reached.wait()
                # F leaves while the put-back is in flight: it reads F's ids before G's
                # retraction records the new one, and changes the ledger after it.
                tg.start_soon(lambda: getattr(second, leave)(fact_id=f, actor="dpo", reason="x"))
                await change.reached.wait()
                put.go.set()
                while not ledger.is_retracted(g):
                    await anyio.sleep(0.001)
                for _ in range(20):
                    await anyio.sleep(0)
                change.go.set()
            assert f not in held(store), held(store)
            assert held(store) == {}

    anyio.run(scenario)


def test_a_put_back_of_a_fact_retracted_meanwhile_is_removed_again(tmp_path: Path) -> None:
    store = SlowPut("vectors")

    async def scenario() -> None:
        with Ledger(tmp_path / "ledger.jsonl") as ledger:
            custody = Custody(ledger, StoreSet([store], FAST))
            f, g = await chain(custody)
            put = Gate()
            store.gate = put
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: custody.retract(fact_id=g, actor="ops", reason="wrong"))
                await put.reached.wait()
                await custody.retract(fact_id=f, actor="ops", reason="wrong too")
                put.go.set()
            assert ledger.is_retracted(f) and ledger.is_retracted(g)
            assert held(store) == {}

    anyio.run(scenario)


def test_resume_decides_each_operation_on_its_own(tmp_path: Path) -> None:
    store = InProcessStore("vectors")
    location = tmp_path / "ledger.jsonl"

    def custody(ledger: Ledger) -> Custody:
        return Custody(ledger, StoreSet([store], FAST), outbox=str(location) + ".outbox")

    async def crashed() -> str:
        with Ledger(location) as ledger:
            flows = custody(ledger)
            f = (await flows.write(request("v"))).event.fact_id
            forget = ledger.forget

            def io_error(**_: Any) -> Any:
                raise OSError(5, "Input/output error")  # before anything was written

            ledger.forget = io_error  # type: ignore[method-assign,assignment]
            with pytest.raises(OSError):
                await flows.forget(fact_id=f, actor="dpo", reason="gdpr")
            ledger.forget = forget  # type: ignore[method-assign]

            async def dies(*_: Any) -> None:
                raise Crash

            store.remove = dies  # type: ignore[method-assign,assignment]
            with pytest.raises(Crash):
                await flows.retract(fact_id=f, actor="ops", reason="wrong")
            del store.remove
            return f

    f = anyio.run(crashed)
    assert f in held(store)

    async def restart() -> Any:
        with Ledger(location) as ledger:
            return await custody(ledger).resume()

    done = anyio.run(restart)
    assert held(store) == {}
    assert [o.operation for o in done.dropped] == ["forget"]
    assert done.finished[f].verification == {"vectors": "verified"}
    assert Outbox(str(location) + ".outbox").pending() == []


def test_a_line_edited_out_of_shape_is_skipped_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl.outbox"
    entry = {
        "owe": "e1",
        "factId": "f",
        "store": "vectors",
        "externalId": "x",
        "operation": "forget",
        "at": "2026-01-01T00:00:00Z",
        "pid": 2**70,  # no process can have it
    }
    lines = [entry, {"settled": 5}, {**entry, "owe": ["e2"]}, {"settled": "e1x"}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    box = Outbox(path)
    (owed,) = box.pending()
    assert owed.entry == "e1" and not box.in_flight(owed)
    box.settle([owed])
    assert box.pending() == []

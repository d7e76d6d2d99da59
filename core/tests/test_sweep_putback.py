"""A sweep puts back what it makes current again (``stores.sweep_restore``): the head of a chain
swept while the fact it superseded stays (held, in a space not swept) leaves that fact current in
the ledger, so the mirroring stores hold it again, recorded on the head's forget event.

The builtin in-memory reference store, whose vendor rows are read directly, an append-only
store beside it, and an in-memory ledger on a clock the test moves."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from sweepworld import CUTOFF, SweepWorld

from agent_custody_state import LedgerError
from agent_custody_state.server.shapes import sweep_shape


class World(SweepWorld):
    """A ledger whose clock the test sets, a mirroring store and an append-only one."""

    def __init__(self, run: Any = None) -> None:
        super().__init__(run, with_log=True)


@pytest.fixture
def world() -> Iterator[World]:
    w = World()
    yield w
    w.ledger.close()


def test_a_held_ancestor_goes_back_into_the_mirror_and_leaves_again_when_forgotten(
    world: World,
) -> None:
    async def scenario() -> None:
        a = await world.write("pro")
        b = await world.write("enterprise", supersedes=a.fact_id)
        world.ledger.hold(fact_id=a.fact_id, actor="legal", reason="case 7")
        assert world.mirrored() == {b.fact_id: "enterprise"}
        report = await world.sweep()
        (swept,) = report.forgotten
        assert swept.event.fact_id == b.fact_id and report.held == [a.fact_id]
        assert swept.restored is not None and swept.restored.fact_id == a.fact_id
        assert swept.event.extra["restored"]["external"] == swept.restored.external
        assert world.mirrored() == {a.fact_id: "pro"}  # current again, and held again
        new_id = swept.restored.external["mirror"]
        assert world.ledger.current_external(a.fact_id)["mirror"] == new_id
        assert sweep_shape(report)["forgotten"][0]["restored"]["factId"] == a.fact_id
        # The recorded id is the one a later forget removes and verifies.
        world.ledger.release(fact_id=a.fact_id, actor="legal", reason="closed")
        done = await world.custody.forget(fact_id=a.fact_id, actor="dpo", reason="gdpr")
        assert done.removal.verification["mirror"] == "verified"
        assert world.mirrored() == {}
        assert "pro" not in str(world.log.vendor.rows)  # the append-only copy left too

    anyio.run(scenario)


def test_an_ancestor_in_a_space_not_swept_goes_back(world: World) -> None:
    async def scenario() -> None:
        a = await world.write("pro", space="org")
        b = await world.write("enterprise", supersedes=a.fact_id, space="team:x")
        report = await world.sweep(space="team:x")
        assert [s.event.fact_id for s in report.forgotten] == [b.fact_id]
        assert world.mirrored() == {a.fact_id: "pro"}
        assert world.ledger.get(a.fact_id).valid_to is None  # type: ignore[union-attr]

    anyio.run(scenario)


def test_a_chain_swept_to_a_held_root_puts_the_root_back_once(world: World) -> None:
    async def scenario() -> None:
        a = await world.write("free")
        b = await world.write("pro", supersedes=a.fact_id)
        c = await world.write("enterprise", supersedes=b.fact_id)
        world.ledger.hold(fact_id=a.fact_id, actor="legal", reason="case 7")
        report = await world.sweep()
        restored = {s.event.fact_id: s.restored for s in report.forgotten}
        assert set(restored) == {b.fact_id, c.fact_id}
        assert restored[b.fact_id] is None  # superseded: not a head, uncovers nothing
        root = restored[c.fact_id]
        assert root is not None and root.fact_id == a.fact_id
        assert world.mirrored() == {a.fact_id: "free"}
        assert world.ledger.current_external(a.fact_id)["mirror"] in world.mirror.vendor.rows

    anyio.run(scenario)


def test_a_whole_chain_swept_puts_nothing_back(world: World) -> None:
    async def scenario() -> None:
        a = await world.write("pro")
        await world.write("enterprise", supersedes=a.fact_id)
        report = await world.sweep()
        assert len(report.forgotten) == 2
        assert all(s.restored is None for s in report.forgotten)
        assert world.mirrored() == {}
        assert "restored" not in sweep_shape(report)["forgotten"][0]

    anyio.run(scenario)


def test_a_failed_put_back_is_reported_and_does_not_stop_the_sweep(world: World) -> None:
    async def scenario() -> None:
        a = await world.write("pro")
        b = await world.write("enterprise", supersedes=a.fact_id)
        world.ledger.hold(fact_id=a.fact_id, actor="legal", reason="case 7")
        world.mirror.vendor.fail = True
        report = await world.sweep()
        (swept,) = report.forgotten
        assert world.ledger.get(b.fact_id).forgotten is not None  # type: ignore[union-attr]
        assert swept.restored is not None and set(swept.restored.failed) == {"mirror"}
        assert "restored" not in swept.event.extra  # nothing was put back, nothing recorded
        assert "mirror" in swept.removal.still_held  # and the swept value is named as held

    anyio.run(scenario)


def test_a_head_held_before_the_ledger_sweeps_gets_its_put_back_undone() -> None:
    world: World

    async def racing_run(fn: Any, *args: Any, **kwargs: Any) -> Any:
        # A legal hold lands on the head between the plan (and its put-back) and the sweep.
        if getattr(fn, "__name__", "") == "_sweep_ledger":
            world.ledger.hold(fact_id=head[0], actor="legal", reason="late")
        return fn(*args, **kwargs)

    world = World(run=racing_run)
    head: list[str] = []

    async def scenario() -> None:
        a = await world.write("pro", space="org")
        b = await world.write("enterprise", supersedes=a.fact_id, space="team:x")
        head.append(b.fact_id)
        report = await world.sweep(space="team:x")
        assert report.forgotten == [] and report.held == [b.fact_id]
        assert world.mirrored() == {b.fact_id: "enterprise"}  # a's put-back was removed
        assert (
            world.ledger.current_external(a.fact_id)
            == world.ledger.get(  # type: ignore[union-attr]
                a.fact_id
            ).external
        )

    anyio.run(scenario)
    world.ledger.close()


def test_a_sweep_the_ledger_refuses_puts_nothing_back(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> None:
        a = await world.write("pro", space="org")
        await world.write("enterprise", supersedes=a.fact_id, space="team:x")
        puts: list[Any] = []
        insert = world.mirror.vendor.insert

        def counted(record: Any) -> str:
            puts.append(record)
            return insert(record)

        monkeypatch.setattr(world.mirror.vendor, "insert", counted)
        for bad in ({"actor": 7}, {"reason": None}, {"receipt_id": 12}):
            args: dict[str, Any] = {"actor": "dpo", "reason": "r", **bad}
            with pytest.raises(LedgerError):
                await world.custody.sweep(before=CUTOFF, space="team:x", **args)
        assert puts == []  # refused before anything was put back (or compensated)

    anyio.run(scenario)

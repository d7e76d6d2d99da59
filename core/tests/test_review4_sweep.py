"""Review 4: a sweep's put-backs (``stores.sweep_restore``) against failures part-way and races:
after a sweep, every fact the ledger holds as current is in the mirroring store under the ids
the ledger records, and no value the ledger erased is left there."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from sweepworld import SweepWorld

from agent_custody_state import Ledger


class World(SweepWorld):
    """A ledger on a clock the test moves and a mirroring store."""

    def check(self) -> None:
        """The mirror holds exactly the current facts, under the ids the ledger records."""
        rows = self.rows()
        expected: dict[str, Any] = {}
        for fact in self.ledger.facts():
            now = self.ledger.get(fact.fact_id)
            assert now is not None
            if (
                now.forgotten is None
                and now.valid_to is None
                and not self.ledger.is_retracted(fact.fact_id)
            ):
                expected[fact.fact_id] = now.value
                ids = self.ledger.current_external(fact.fact_id)
                assert ids.get("mirror") in rows, f"{fact.fact_id} recorded under a missing id"
        assert self.mirrored() == expected


@pytest.fixture
def world() -> Iterator[World]:
    w = World()
    yield w
    w.ledger.close()


def test_a_sweep_failing_in_a_later_pass_keeps_what_the_earlier_passes_recorded(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pass 1 forgets the head and records the put-back of its held ancestor; pass 2 fails
    reading (a backend error, not a refusal of the ledger's sweep). The put-back recorded on
    the forget event must stay, and the forgotten head must still leave the store."""

    async def scenario() -> None:
        a = await world.write("pro", space="a")
        await world.write("enterprise", supersedes=a.fact_id, space="a")
        await world.write("other", space="b")
        world.ledger.hold(fact_id=a.fact_id, actor="legal", reason="case 7")
        listing = world.ledger.learned_before
        calls: list[Any] = []

        def failing(before: Any, space: Any = None) -> Any:
            calls.append(space)
            if space == "b":
                raise OSError("disk I/O error")
            return listing(before, space)

        monkeypatch.setattr(world.ledger, "learned_before", failing)
        with pytest.raises(OSError):
            await world.sweep(within=lambda name: True)
        monkeypatch.undo()
        world.check()

    anyio.run(scenario)


def test_a_head_retracted_while_the_sweep_runs_leaves_one_copy_of_its_ancestor() -> None:
    """The head is retracted (the retraction puts its ancestor back and records it) between the
    sweep's put-back and the ledger's sweep, which forgets the retracted head all the same."""
    world: World
    head: list[str] = []

    async def racing_run(fn: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(fn, "__name__", "") == "_sweep_ledger" and head:
            await world.custody.retract(fact_id=head.pop(), actor="agent", reason="wrong")
        return fn(*args, **kwargs)

    world = World(run=racing_run)

    async def scenario() -> None:
        a = await world.write("pro", space="org")
        b = await world.write("enterprise", supersedes=a.fact_id, space="team:x")
        head.append(b.fact_id)
        await world.sweep(space="team:x")
        world.check()
        assert len(world.rows()) == 1, world.rows()

    anyio.run(scenario)
    world.ledger.close()


def test_a_crypto_shred_sweep_puts_back_the_plain_value() -> None:
    world = World(forget_mode="crypto-shred")

    async def scenario() -> None:
        a = await world.write({"tier": "pro"}, space="org")
        await world.write({"tier": "ent"}, supersedes=a.fact_id, space="team:x")
        await world.sweep(space="team:x")
        world.check()
        assert world.mirrored() == {a.fact_id: {"tier": "pro"}}

    anyio.run(scenario)
    world.ledger.close()


def test_an_ancestor_retracted_while_the_sweep_runs_is_not_left_in_the_store() -> None:
    """The ancestor is retracted between its put-back and the ledger's sweep: the retraction
    removed the ids the ledger knew then, not the copy being put back."""
    world: World
    ancestor: list[str] = []

    async def racing_run(fn: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(fn, "__name__", "") == "_sweep_ledger" and ancestor:
            await world.custody.retract(fact_id=ancestor.pop(), actor="agent", reason="wrong")
        return fn(*args, **kwargs)

    world = World(run=racing_run)

    async def scenario() -> None:
        a = await world.write("pro", space="org")
        await world.write("enterprise", supersedes=a.fact_id, space="team:x")
        ancestor.append(a.fact_id)
        report = await world.sweep(space="team:x")
        world.check()
        assert world.rows() == {}
        (swept,) = report.forgotten
        assert swept.restored is not None and not swept.restored.external

    anyio.run(scenario)
    world.ledger.close()


def test_a_middle_link_held_while_the_sweep_runs_is_what_stays_current() -> None:
    """free <- pro <- enterprise, all swept but the held root: the plan puts the root back.
    A hold lands on ``pro`` before the ledger sweeps: ``pro`` stays current, the root does not
    become current, and the store must not hold the root as if it were."""
    world: World
    middle: list[str] = []

    async def racing_run(fn: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(fn, "__name__", "") == "_sweep_ledger" and middle:
            world.ledger.hold(fact_id=middle.pop(), actor="legal", reason="late")
        return fn(*args, **kwargs)

    world = World(run=racing_run)

    async def scenario() -> None:
        a = await world.write("free")
        b = await world.write("pro", supersedes=a.fact_id)
        await world.write("enterprise", supersedes=b.fact_id)
        world.ledger.hold(fact_id=a.fact_id, actor="legal", reason="case 7")
        middle.append(b.fact_id)
        await world.sweep()
        assert world.ledger.get(a.fact_id).valid_to is not None  # type: ignore[union-attr]
        assert a.fact_id not in world.mirrored()

    anyio.run(scenario)
    world.ledger.close()


def test_a_sweep_stopped_before_a_middle_link_leaves_no_superseded_copy(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """free (space c, not swept) <- pro (space b) <- enterprise (space a): the pass of space a
    forgets the head and records the root's put-back, then the pass of space b fails before it
    forgets ``pro``. ``pro`` is current, the root is not: the store must not hold the root."""

    async def scenario() -> None:
        a = await world.write("free", space="c")
        b = await world.write("pro", supersedes=a.fact_id, space="b")
        await world.write("enterprise", supersedes=b.fact_id, space="a")
        listing = world.ledger.learned_before

        def failing(before: Any, space: Any = None) -> Any:
            if space == "b":
                raise OSError("disk I/O error")
            return listing(before, space)

        monkeypatch.setattr(world.ledger, "learned_before", failing)
        with pytest.raises(OSError):
            await world.sweep(within=lambda name: name in ("a", "b"))
        monkeypatch.undo()
        assert world.ledger.get(a.fact_id).valid_to is not None  # type: ignore[union-attr]
        assert a.fact_id not in world.mirrored()
        assert "enterprise" not in world.mirrored().values()

    anyio.run(scenario)


def test_a_sweeps_extras_may_not_replace_the_forget_events_own_keys(tmp_path: Any) -> None:
    """As ``forget(extra=...)``: an extra named like a key of the event itself (``kind``,
    ``factId``) wrote an event that reads as another one, and a ledger ``verify`` refuses."""
    from agent_custody_state import LedgerError

    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        a = ledger.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")
        before = path.read_bytes()
        for bad in ({"kind": "assert"}, {"factId": "zzz"}, {"valueDigest": None}):
            with pytest.raises(LedgerError, match="must not replace"):
                ledger.sweep(
                    before="2100-01-01T00:00:00Z", actor="a", reason="r", extras={a.fact_id: bad}
                )
        assert path.read_bytes() == before
        assert ledger.get(a.fact_id).forgotten is None  # type: ignore[union-attr]

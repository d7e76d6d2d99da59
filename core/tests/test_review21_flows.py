"""What a stopped or failed flow leaves live (twenty-first review): a stopped sweep does not wait
on the stores for its put-backs, and a forget that fails leaves no intent claimed by this
process. Each test fails without its fix."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state.cli import main
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.stores import intents, sweep_restore
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore
from agent_custody_state.stores.outbox import Outbox
from agent_custody_state.stores.sweep_interrupt import SweepInterrupted

sys.path.insert(0, str(Path(__file__).parent))
from sweepworld import SweepWorld


def _slowed(world: SweepWorld) -> list[str]:
    """The mirror's removals take 30 s (a store that hangs); each call is noted."""
    calls: list[str] = []
    removing = world.mirror.remove

    async def remove(external_id: str, fact: Any) -> None:
        calls.append(external_id)
        await asyncio.sleep(30)
        await removing(external_id, fact)

    world.mirror.remove = remove  # type: ignore[method-assign]
    world.mirror.removing = removing  # type: ignore[attr-defined]
    return calls


def test_a_stopped_sweep_does_not_wait_on_the_stores_for_its_put_backs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped before its first forget, the sweep's put-back was recorded nowhere; its
    compensation waited on the store for as long as the store took (30 s here). Now the store
    gets ``STOPPED_SECONDS``, the copy is owed in the outbox, and the next ``resume`` removes it."""
    monkeypatch.setattr(sweep_restore, "STOPPED_SECONDS", 0.2)
    world = SweepWorld()
    outbox = Outbox(tmp_path / "outbox")
    world.custody = Custody(world.ledger, world.stores, outbox=outbox)

    async def setup() -> tuple[str, str]:
        a = await world.write("pro")
        b = await world.write("enterprise", supersedes=a.fact_id)
        world.ledger.hold(fact_id=a.fact_id, actor="legal", reason="case 7")
        return a.fact_id, b.fact_id

    try:
        a, b = anyio.run(setup)
        calls = _slowed(world)
        started = time.monotonic()
        with pytest.raises(SweepInterrupted):  # a KeyboardInterrupt: it ends the event loop
            anyio.run(lambda: world.sweep(stop=lambda: True))
        assert time.monotonic() - started < 10
        assert calls  # the store was asked, and not waited for
        assert world.mirrored() == {a: "pro", b: "enterprise"}  # a: a put-back not recorded
        assert world.ledger.get(b).forgotten is None  # type: ignore[union-attr]
        [owed] = outbox.pending()
        assert (owed.fact_id, owed.store, owed.operation) == (a, "mirror", "put")
        world.mirror.remove = world.mirror.removing  # type: ignore[attr-defined]
        anyio.run(world.custody.resume)
        assert world.mirrored() == {b: "enterprise"}
        assert outbox.pending() == []
    finally:
        world.ledger.close()


def _custody(tmp_path: Path, **kwargs: Any) -> tuple[Custody, InProcessStore, str]:
    """A file ledger with one fact held by an in-process store."""
    store = InProcessStore("mem")
    ledger = Ledger(str(tmp_path / "l.jsonl"))
    custody = Custody(ledger, [store], **kwargs)
    request = AssertRequest(subject="s", predicate="p", value="v", space="o", actor="a")
    return custody, store, anyio.run(custody.write, request).event.fact.fact_id


def test_a_forget_whose_intent_cannot_be_finished_leaves_it_to_a_later_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forget that failed after its commit, whose intent then could not be finished (the
    ledger unreadable a moment): the intent stayed "live" in this process, so ``resume`` here
    skipped it until the process ended, and the close's error replaced the forget's own."""
    assert main(["keygen", "--out", str(tmp_path / "k")]) == 0
    (tmp_path / "certs").mkdir()
    custody, _, fact_id = _custody(
        tmp_path, certificate_key=str(tmp_path / "k"), certificates=tmp_path / "certs"
    )

    async def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("store client bug")

    def unreadable(*args: Any, **kwargs: Any) -> None:
        raise OSError("ledger read failed")

    monkeypatch.setattr(custody.stores, "remove_all", broken)
    monkeypatch.setattr(intents, "recovered", unreadable)
    with pytest.raises(RuntimeError, match="store client bug"):
        anyio.run(lambda: custody.forget(fact_id=fact_id, actor="a", reason="r"))
    monkeypatch.undo()
    assert list((tmp_path / "certs").glob(".intent-*"))
    anyio.run(custody.resume)
    assert [p.name for p in (tmp_path / "certs").iterdir()] == [f"{fact_id}.json"]
    custody.ledger.close()


def test_a_forget_cut_before_its_stores_leaves_its_removal_to_a_later_resume(
    tmp_path: Path,
) -> None:
    """Ctrl-C (or a cancel) inside a store's removal: the outbox entry stayed "in flight" for
    the rest of the process, so ``resume`` here left it to a writer that had given up."""
    custody, store, fact_id = _custody(tmp_path, outbox=tmp_path / "outbox")
    removing = store.remove

    async def cut(external_id: str, fact: Any) -> None:
        raise KeyboardInterrupt

    store.remove = cut  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        anyio.run(lambda: custody.forget(fact_id=fact_id, actor="a", reason="r"))
    store.remove = removing  # type: ignore[method-assign]
    assert store.vendor.rows
    done = anyio.run(custody.resume)
    assert done is not None and list(done.finished) == [fact_id] and not done.left
    assert not store.vendor.rows
    custody.ledger.close()


def test_a_stopped_sweep_leaves_the_removals_it_did_not_make_to_a_later_resume(
    tmp_path: Path,
) -> None:
    """A sweep stopped before its stores: the entries of the facts not reached stayed "in
    flight", so a ``resume`` in the same process (a server's next sweep) never finished them."""
    custody, store, _ = _custody(tmp_path, outbox=tmp_path / "outbox")
    request = AssertRequest(subject="t", predicate="p", value="w", space="o", actor="a")
    anyio.run(custody.write, request)
    stages: list[str] = []
    with pytest.raises(SweepInterrupted):
        anyio.run(
            lambda: custody.sweep(
                before="2999-01-01T00:00:00Z",
                actor="a",
                reason="r",
                progress=lambda stage, done, total: stages.append(stage),
                stop=lambda: "stores" in stages,
            )
        )
    assert len(store.vendor.rows) == 1  # the second fact's store was not asked
    done = anyio.run(custody.resume)
    assert done is not None and len(done.finished) == 1 and not done.left
    assert not store.vendor.rows
    custody.ledger.close()

"""Twenty-first review: a platform add still pending when the put gave up was remembered in
the process only, so a restarted store answered "holds nothing" / "removed" while mem0 could
still complete the add; and an event poll that failed (or a put cancelled mid-wait) lost the
event even in the same process. The pending add events are now recorded in a sidecar file
before the wait and dropped once they settle."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from pydantic import ValidationError

from agent_custody_state.stores import StoreError
from agent_custody_state_conformance.stores import make_fact
from agent_custody_state_mem0.pending import PendingAdds
from agent_custody_state_mem0.settings import Mem0Settings
from agent_custody_state_mem0.store import Mem0Store
from agent_custody_state_mem0.testing import FakeMem0

pytestmark = pytest.mark.anyio
MakeStore = Callable[..., Mem0Store]
NEVER = 10**6  # PENDING answers an event gives before it settles: it does not, in a test


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _put_left_pending(store: Mem0Store) -> str:
    """Put a fact whose add stays PENDING past the store's wait; its fact id."""
    fact = make_fact()
    with pytest.raises(StoreError, match="still pending after"):
        await store.put(fact)
    return fact.fact_id


async def test_a_restarted_store_still_owes_an_add_that_may_land(
    fake: FakeMem0, make_store: MakeStore, tmp_path: Path
) -> None:
    sidecar = tmp_path / "pending.jsonl"
    fake.async_add, fake.event_polls_pending = True, NEVER
    first = make_store(event_wait_seconds=0.2, pending_file=str(sidecar))
    fact = make_fact()
    with pytest.raises(StoreError, match="still pending after"):
        await first.put(fact)
    first.close()

    restarted = make_store(event_wait_seconds=0.2, pending_file=str(sidecar))
    # Before the fix: held_ids == [] ("no copy left") and verify_removed True, then the copy
    # appeared once mem0 completed the add.
    with pytest.raises(StoreError, match=f"still pending.*recorded in {sidecar}"):
        await restarted.held_ids(fact)
    assert await restarted.verify_removed("no-memory-yet", fact) is False

    fake.complete_events()  # mem0 catches up: the copy exists and is now found
    held = await restarted.held_ids(fact)
    assert [fake.items[i]["metadata"]["factId"] for i in held] == [fact.fact_id]
    assert not sidecar.exists()  # settled: nothing pending is left recorded
    await restarted.remove(held[0], fact)
    assert await restarted.verify_removed(held[0], fact) is True


async def test_the_default_file_is_beside_mem0s_files_per_scope(
    fake: FakeMem0, make_store: MakeStore, tmp_path: Path
) -> None:
    fake.async_add, fake.event_polls_pending = True, NEVER
    first = make_store(event_wait_seconds=0.2, mem0_dir=str(tmp_path))
    fact_id = await _put_left_pending(first)
    [sidecar] = tmp_path.glob("pending-adds-mem0-*.jsonl")
    assert stat.S_IMODE(sidecar.stat().st_mode) == 0o600
    [line] = sidecar.read_text().splitlines()
    assert json.loads(line)["factId"] == fact_id  # the value is never recorded
    restarted = make_store(event_wait_seconds=0.2, mem0_dir=str(tmp_path))
    fact = make_fact(fact_id=fact_id)
    assert await restarted.verify_removed("no-memory-yet", fact) is False
    # Another user's store on the same platform keeps a file of its own.
    other = Mem0Settings(user_id="someone-else", host=fake.url, mem0_dir=str(tmp_path))
    assert other.default_pending_file("mem0", str(tmp_path)) != str(sidecar)


async def test_an_event_poll_that_failed_still_counts_the_add(
    fake: FakeMem0, make_store: MakeStore, tmp_path: Path
) -> None:
    fake.async_add, fake.event_polls_pending = True, NEVER
    store = make_store(event_wait_seconds=5, pending_file=str(tmp_path / "p.jsonl"))
    fake.fail_on = {"event"}
    fact = make_fact()
    with pytest.raises(StoreError, match="event poll"):
        await store.put(fact)
    fake.fail_on = set()
    # Before the fix the event was forgotten: held_ids listed nothing, verify said removed.
    with pytest.raises(StoreError, match="still pending"):
        await store.held_ids(fact)
    assert await store.verify_removed("no-memory-yet", fact) is False


async def test_a_put_cut_off_mid_wait_leaves_the_event_recorded(
    fake: FakeMem0, make_store: MakeStore, tmp_path: Path
) -> None:
    sidecar = str(tmp_path / "p.jsonl")
    fake.async_add, fake.event_polls_pending = True, NEVER
    store = make_store(event_wait_seconds=30, pending_file=sidecar)
    fact = make_fact()
    with anyio.move_on_after(0.5):  # as a crash would: the put never returns
        await store.put(fact)
    restarted = make_store(pending_file=sidecar)
    with pytest.raises(StoreError, match="still pending"):
        await restarted.held_ids(fact)


async def test_a_settled_add_leaves_no_file(
    fake: FakeMem0, make_store: MakeStore, tmp_path: Path
) -> None:
    sidecar = tmp_path / "p.jsonl"
    fake.async_add, fake.event_polls_pending = True, 2
    store = make_store(pending_file=str(sidecar))
    fact = make_fact()
    memory_id = await store.put(fact)
    assert fake.items[memory_id]["metadata"]["factId"] == fact.fact_id
    assert not sidecar.exists()
    assert await store.held_ids(fact) == [memory_id]


def test_two_writers_keep_each_others_events(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    one, two = PendingAdds(path), PendingAdds(path)  # two processes' views of one file
    one.record("fact-1", "event-1")
    two.record("fact-2", "event-2")
    assert PendingAdds(path).of_fact("fact-1") == ["event-1"]
    assert PendingAdds(path).of_fact("fact-2") == ["event-2"]
    one.settle("event-2")  # whoever sees it settle drops it
    assert PendingAdds(path).of_fact("fact-2") == []
    assert two.of_fact("fact-1") == ["event-1"]


def test_a_damaged_file_stops_the_build_naming_it(
    fake: FakeMem0, make_store: MakeStore, tmp_path: Path
) -> None:
    sidecar = tmp_path / "p.jsonl"
    sidecar.write_text('{"factId": "f", "eventId": "e"}\nnot json\n')
    before = sidecar.read_bytes()
    with pytest.raises(StoreError, match=rf"{sidecar}, line 2: not a pending add record"):
        make_store(pending_file=str(sidecar))
    assert sidecar.read_bytes() == before
    with pytest.raises(StoreError, match="does not exist; create it"):
        make_store(pending_file=str(tmp_path / "missing" / "p.jsonl"))
    assert not (tmp_path / "missing").exists()


def test_pending_file_is_a_platform_setting(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="pending_file"):
        Mem0Settings(mode="local", user_id="u", pending_file=str(tmp_path / "p.jsonl"))
    assert Mem0Settings(user_id="u").pending_file is None  # existing configs are unchanged
    assert os.path.basename(Mem0Settings(user_id="u").default_pending_file("a/b", "/x")) == (
        os.path.basename(Mem0Settings(user_id="u").default_pending_file("a_b", "/x"))
    )

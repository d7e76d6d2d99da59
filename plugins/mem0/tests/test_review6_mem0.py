"""Sixth review: the local ``Memory``'s history kept a forgotten value on disk; an add still
pending when the put gave up was promised absent ("no copy left") and then appeared; a password
in the platform ``host`` was shown in errors and httpx's request log."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import local_settings

from agent_custody_state.stores import StoreSet, StoreWriteError, VerifyPolicy
from agent_custody_state_conformance.stores import make_fact
from agent_custody_state_mem0.store import Mem0Store, build
from agent_custody_state_mem0.testing import FakeMem0

pytestmark = pytest.mark.anyio

VALUE = "a-value-to-erase-4711"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def local(tmp_path: Path) -> Iterator[Mem0Store]:
    store = build(local_settings(tmp_path), name="mem0-local")
    yield store
    store.close()


def history_texts(path: Path) -> list[tuple[str | None, str | None]]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT old_memory, new_memory FROM history").fetchall()


async def test_a_local_removal_leaves_the_value_nowhere_in_the_history_db(
    local: Mem0Store, tmp_path: Path
) -> None:
    fact = make_fact(value=VALUE)
    memory_id = await local.put(fact)
    await local.remove(memory_id, fact)
    assert await local.verify_removed(memory_id, fact) is True
    # mem0's delete writes a DELETE row holding the deleted text; none may stay, nor its bytes.
    assert history_texts(tmp_path / "history.db") == []
    assert VALUE.encode() not in (tmp_path / "history.db").read_bytes()


async def test_text_left_in_the_history_is_not_verified_and_a_removal_clears_it(
    local: Mem0Store,
) -> None:
    fact = make_fact(value=VALUE)
    memory_id = await local.put(fact)
    local.backend._memory.delete(memory_id)  # type: ignore[attr-defined]  # mem0's own delete
    assert await local.verify_removed(memory_id, fact) is False
    await local.remove(memory_id, fact)  # already gone from the vector store: still cleans
    assert await local.verify_removed(memory_id, fact) is True


async def test_a_password_in_the_host_is_never_shown(
    fake: FakeMem0,
    make_store: Callable[..., Mem0Store],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    host = fake.url.replace("http://", "http://proxy:pw-hunter2@")
    stores = StoreSet([make_store(host=host)], VerifyPolicy(attempts=1, delay=0))
    fake.fail = True  # the client check fails: its message names the host
    with pytest.raises(StoreWriteError) as caught:
        await stores.put_all(make_fact())
    shown = [str(caught.value), caught.value.message, *caught.value.compensation.values()]
    shown += [record.getMessage() for record in caplog.records]
    assert any("proxy:***@127.0.0.1" in text for text in shown)
    assert not [text for text in shown if "hunter2" in text]


async def test_an_add_still_pending_when_the_put_gave_up_is_owed_not_promised_absent(
    fake: FakeMem0, make_store: Callable[..., Mem0Store]
) -> None:
    store = make_store(event_wait_seconds=0.2)
    stores = StoreSet([store], VerifyPolicy(attempts=1, delay=0))
    fake.async_add, fake.event_polls_pending = True, 1000
    fact = make_fact()
    with pytest.raises(StoreWriteError) as caught:
        await stores.put_all(fact)
    # Before the fix: "no copy left", nothing owed, and the memory appeared afterwards.
    assert caught.value.owed == ["mem0"]
    assert caught.value.compensation["mem0"].startswith("may hold a copy (looking it up failed")
    assert await store.verify_removed("no-memory-yet", fact) is False
    fake.complete_events()  # the platform catches up: the retry (outbox) now finds the copy
    held = await store.held_ids(fact)
    assert [fake.items[i]["metadata"]["factId"] for i in held] == [fact.fact_id]
    await store.remove(held[0], fact)
    assert await store.verify_removed(held[0], fact) is True

"""Every value the ledger takes goes through LangGraph's stores (tenth review): a value with
U+0000 (PostgreSQL's ``jsonb`` refuses it), a lone surrogate (orjson and UTF-8 refuse it) or 256
levels of nesting (orjson stops at 254) is stored as its JSON text beside ``"valueJson": true``,
held, superseded and removed, verified; before, the put failed with the backend's error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger
from agent_custody_state.backends.memory import MemoryBackend
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.stores import StoreSet, VerifyPolicy, fact_text
from agent_custody_state.stores.flows import Custody
from agent_custody_state_langgraph.settings import LangGraphSettings
from agent_custody_state_langgraph.store import LangGraphStore, build, stored_value

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def nested(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels - 1):
        value = [value]
    return value


VALUES = {
    "nul-string": "a\x00b",
    "nul-key-and-member": {"k\x00": ["v\x00"]},
    "lone-surrogate": "x\ud800y",
    "deepest": nested(256),
}


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LangGraphStore]:
    if request.param == "memory":
        settings = LangGraphSettings(backend="memory")
    elif request.param == "sqlite":
        settings = LangGraphSettings(backend="sqlite", path=str(tmp_path / "lg.sqlite"))
    else:
        monkeypatch.setenv("LG_REVIEW10_URL", request.getfixturevalue("postgres_url"))
        settings = LangGraphSettings(backend="postgres", dsn_env="LG_REVIEW10_URL")
    store = build(settings, name="langmem")
    yield store
    store.close()


def item(store: LangGraphStore, fact_id: str) -> dict[str, Any] | None:
    hits = store.base.search((), filter={"factId": fact_id})
    return hits[0].value if hits else None


@pytest.mark.parametrize("value", list(VALUES.values()), ids=list(VALUES))
async def test_what_the_ledger_takes_langgraph_holds_and_removes(
    store: LangGraphStore, value: Any
) -> None:
    stores = StoreSet([store], VerifyPolicy(attempts=1, delay=0.0))
    with Ledger(MemoryBackend("memory:")) as ledger:
        custody = Custody(ledger, stores)
        request = AssertRequest(
            subject="acct:1", predicate="plan", value=value, space="team", actor="ag\x00ent"
        )
        old = (await custody.write(request)).event.fact
        held = item(store, old.fact_id)
        assert held is not None
        assert held["content"] == fact_text(old)
        assert held["valueJson"] is True and stored_value(held) == old.value == value
        new = await custody.write(request.with_(value="new", supersedes=old.fact_id))
        assert new.mirror is not None and new.mirror.verification == {"langmem": "verified"}
        assert item(store, old.fact_id) is None
        kept = item(store, new.event.fact.fact_id)
        assert kept is not None and "valueJson" not in kept and stored_value(kept) == "new"
        gone = await custody.forget(fact_id=new.event.fact.fact_id, actor="dpo", reason="gdpr")
        assert gone.removal.verification == {"langmem": "verified"}
        assert item(store, new.event.fact.fact_id) is None


def test_values_every_backend_holds_are_stored_as_they_are() -> None:
    from agent_custody_state_langgraph.store import holds_as_is

    plain = {"name": "zoë \U0001f600 \ufffe", "n": [1, 2.5, None], "deep": nested(200)}
    assert holds_as_is(plain)
    assert holds_as_is(nested(201))  # 200 lists
    assert not holds_as_is(nested(202))
    assert not holds_as_is({"a\x00": 1})

"""A namespace LangGraph refuses is refused before any store is written (``Store.refusal``).

A space such as ``acme.com`` under the default namespace ``("memories", "{space}")`` gives a
label with ".", and a space ``langgraph`` under ``("{space}",)`` the root LangGraph reserves.
Before, the write failed at this store's put after the stores before it were written (then
removed again), and its lookup of what the failed put left refused the same namespace, so the
cleanup stayed owed in the outbox for ever. Through LangGraph's real InMemoryStore and
SqliteStore, with every SDK call counted.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from agent_custody_state import Ledger
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.stores import StoreError, StoreSet, StoreWriteError, VerifyPolicy
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.outbox import Outbox
from agent_custody_state_conformance.stores import make_fact
from agent_custody_state_langgraph.settings import LangGraphSettings
from agent_custody_state_langgraph.store import LangGraphStore, build


class Counting:
    """The store's BaseStore, recording the name of every method called on it."""

    def __init__(self, base: BaseStore) -> None:
        self.base = base
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.base, name)
        if not callable(found):
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return found(*args, **kwargs)

        return call


def counted(store: LangGraphStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the SDK calls ``store`` makes from now on."""
    counting = Counting(store.base)
    monkeypatch.setattr(store, "base", counting)
    return counting.calls


@pytest.fixture(params=["memory", "sqlite"])
def langmem(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LangGraphStore]:
    chosen: dict[str, str] = {"backend": request.param}
    if request.param == "sqlite":
        chosen["path"] = str(tmp_path / "lg.sqlite")
    store = build(LangGraphSettings.model_validate(chosen), name="langmem")
    yield store
    store.close()


def write(space: str) -> AssertRequest:
    return AssertRequest(subject="acct:42", predicate="plan", value="pro", space=space, actor="a")


def run_write(stores: Sequence[Any], space: str, outbox: Outbox) -> StoreWriteError:
    async def scenario() -> StoreWriteError:
        with Ledger("memory:") as ledger:
            custody = Custody(ledger, StoreSet(list(stores), VerifyPolicy(1, 0)), outbox=outbox)
            with pytest.raises(StoreWriteError) as caught:
                await custody.write(write(space))
            assert ledger.count() == 0
            return caught.value

    return anyio.run(scenario)


def test_a_dotted_space_reaches_no_store(
    langmem: LangGraphStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first store (LangGraph items under a fixed namespace, which takes any space) is
    never written; the refusing store is not called at all; nothing is owed."""
    first = LangGraphStore("first", InMemoryStore(), namespace=("memories", "all"))
    first_ops, langmem_ops = counted(first, monkeypatch), counted(langmem, monkeypatch)
    outbox = Outbox(tmp_path / "outbox.jsonl")
    refused = run_write([first, langmem], "acme.com", outbox)
    assert refused.store == "langmem"
    assert refused.message == (
        'namespace label "acme.com" (from space "acme.com") is empty or contains "." or '
        "U+0000; LangGraph refuses it"
    )
    assert refused.compensation == {} and refused.owed == []
    assert first_ops == [] and langmem_ops == []
    assert outbox.pending() == []


def test_the_reserved_root_is_refused_before_any_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = LangGraphStore("first", InMemoryStore(), namespace=("memories", "all"))
    rooted = LangGraphStore("rooted", InMemoryStore(), namespace=("{space}",))
    first_ops = counted(first, monkeypatch)
    refused = run_write([first, rooted], "langgraph", Outbox(tmp_path / "outbox.jsonl"))
    assert refused.store == "rooted" and 'namespace root "langgraph"' in refused.message
    assert first_ops == []


def test_put_refuses_exactly_what_the_check_names(
    langmem: LangGraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One check, two callers: ``put`` raises the refusal's own text, without an SDK call;
    a space the check lets through is put."""
    ops = counted(langmem, monkeypatch)
    dotted = make_fact(space="acme.com")
    reason = langmem.refusal(dotted)
    assert reason is not None
    with pytest.raises(StoreError) as caught:
        anyio.run(langmem.put, dotted)
    assert (caught.value.store, caught.value.message) == ("langmem", reason)
    assert ops == []
    fine = make_fact(space="team:support")
    assert langmem.refusal(fine) is None
    assert anyio.run(langmem.put, fine) == fine.fact_id
    assert ops == ["put"]  # the count sees the SDK's calls
    assert langmem.base.get(("memories", "team:support"), fine.fact_id) is not None

"""A fact over Zep's episode cap is refused before any store is written (``Store.refusal``).

Before, the write failed at the Zep store's put after the stores before it were written (then
removed again), and the failed put's cleanup asked Zep for copies it could never have made.
Through the real ``zep-cloud`` SDK on the v4 fake, with every request it receives recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.model import Fact
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.stores import StoreError, StoreSet, StoreWriteError, VerifyPolicy
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore
from agent_custody_state.stores.outbox import Outbox
from agent_custody_state_conformance.stores import make_fact
from agent_custody_state_zep.store import ZepStore, episode_data
from agent_custody_state_zep.testing import FakeZep

MakeStore = Callable[..., ZepStore]


class Recording(InProcessStore):
    """The core's reference store, recording each call it gets."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.calls: list[str] = []

    async def put(self, fact: Fact) -> str:
        self.calls.append("put")
        return await super().put(fact)

    async def remove(self, external_id: str, fact: Fact) -> None:
        self.calls.append("remove")
        await super().remove(external_id, fact)


def test_an_overlong_fact_reaches_no_store_and_no_request_is_made(
    fake: FakeZep, make_store: MakeStore, tmp_path: Path
) -> None:
    first, zep = Recording("vectors"), make_store()
    outbox = Outbox(tmp_path / "outbox.jsonl")
    request = AssertRequest(
        subject="acct:42", predicate="notes", value="x" * 12_000, space="org", actor="a"
    )

    async def scenario() -> StoreWriteError:
        with Ledger("memory:") as ledger:
            custody = Custody(ledger, StoreSet([first, zep], VerifyPolicy(1, 0)), outbox=outbox)
            with pytest.raises(StoreWriteError) as caught:
                await custody.write(request)
            assert ledger.count() == 0
            return caught.value

    seen = len(fake.requests)
    refused = anyio.run(scenario)
    assert refused.store == "zep" and refused.compensation == {} and refused.owed == []
    assert refused.message.endswith("characters as a Zep episode; Zep accepts at most 10000")
    assert first.calls == [] and first.vendor.rows == {}
    assert fake.requests[seen:] == [] and fake.items == {}
    assert outbox.pending() == []


def value_of_length(chars: int) -> Fact:
    """A fact whose episode data is exactly ``chars`` characters long."""
    fact = make_fact(value="")
    return make_fact(fact_id=fact.fact_id, value="x" * (chars - len(episode_data(fact))))


def test_put_refuses_exactly_what_the_check_names(fake: FakeZep, make_store: MakeStore) -> None:
    """One check, two callers, at the cap's edge: ``put`` raises the refusal's own text without
    a request; a fact at the cap is not named and is put."""
    store = make_store(name="graph")
    over, at = value_of_length(10_001), value_of_length(10_000)
    assert len(episode_data(over)) == 10_001 and len(episode_data(at)) == 10_000
    reason = store.refusal(over)
    assert reason is not None and over.fact_id in reason
    seen = len(fake.requests)
    with pytest.raises(StoreError) as caught:
        anyio.run(store.put, over)
    assert (caught.value.store, caught.value.message) == ("graph", reason)
    assert fake.requests[seen:] == []
    assert store.refusal(at) is None
    assert anyio.run(store.put, at) in fake.items
    small = make_store(name="small", max_episode_chars=500)
    assert small.refusal(make_fact(value="y" * 600)) is not None
    assert small.refusal(make_fact()) is None

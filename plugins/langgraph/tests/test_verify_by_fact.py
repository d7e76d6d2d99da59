"""Verification looks for the fact, not only for the key it was written under (SPEC 6: "get is
None and a filtered search misses")."""

from __future__ import annotations

import anyio
from langgraph.store.memory import InMemoryStore

from agent_custody_state_conformance.stores import make_fact
from agent_custody_state_langgraph.store import LangGraphStore, item_value


def test_a_copy_under_another_key_is_not_removed() -> None:
    base = InMemoryStore()
    store = LangGraphStore("langmem", base, namespace=("memories", "dana"))
    fact = make_fact()
    external_id = anyio.run(store.put, fact)
    # The same fact, written again under a key of its own (an agent's copy, a LangMem update).
    base.put(("memories", "dana"), "copied-by-the-agent", item_value(fact))
    anyio.run(store.remove, external_id, fact)
    assert base.search(("memories", "dana"), filter={"factId": fact.fact_id})
    assert anyio.run(store.verify_removed, external_id, fact) is False
    base.delete(("memories", "dana"), "copied-by-the-agent")
    assert anyio.run(store.verify_removed, external_id, fact) is True

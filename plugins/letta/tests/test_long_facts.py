"""A long fact can still be proven removed from Letta.

The checks send the fact text in the query string (``search``, ``query``); proxies in front of
a Letta server refuse long request targets (the fake answers 414 past 8 KiB, as nginx does), so
the adapter sends a bounded prefix: the ``fact:`` tag, not the text, decides what is the fact's.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

from agent_custody_state.stores import StoreSet, VerifyPolicy
from agent_custody_state_conformance.stores import AWKWARD_VALUE, make_fact
from agent_custody_state_letta.store import LettaStore


def test_a_long_fact_is_verified_removed(make_store: Callable[..., LettaStore]) -> None:
    store = make_store()
    fact = make_fact(subject="user:zoë", value=AWKWARD_VALUE)
    other = make_fact(subject="user:zoë", value=AWKWARD_VALUE)  # same text, its own passage

    async def scenario() -> tuple[bool, str]:
        held = fact.with_(external={store.name: await store.put(fact)})
        await store.put(other)
        before = await store.verify_removed(held.external[store.name], held)  # type: ignore[index]
        report = await StoreSet([store], VerifyPolicy(1, 0)).remove_all(held)
        return before, report.verification[store.name]

    assert anyio.run(scenario) == (False, "verified")

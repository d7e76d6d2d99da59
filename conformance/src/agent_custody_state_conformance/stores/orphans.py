"""Store rules for a put that fails after the vendor kept the fact (``held_ids``, SPEC 4.2).

A put that raises has not always failed: the answer of a vendor that stored the fact can be lost
(a timeout, a cut connection). The core then asks the store for its copies by the fact id and
removes them, so no copy is left that no ledger event records. These rules run for stores that
declare the ``"held"`` capability (they implement ``held_ids``), through a wrapper that lets the
real put happen and then raises, as a timeout after the fact would.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from agent_custody_state.ledger.model import Fact
from agent_custody_state.stores import Store, StoreError, StoreSet, StoreWriteError, VerifyPolicy
from agent_custody_state.stores.base import can_find_held

from ..rules import rule
from .base import StoreRules, make_fact

__all__ = ["OrphanRules", "TimesOutAfterStoring"]


class TimesOutAfterStoring:
    """A store whose put reaches the vendor and then raises, as a lost answer would; every
    other attribute (``remove``, ``held_ids``, ``verify_removed``, ...) is the store's own."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.name = inner.name

    async def put(self, fact: Fact) -> str:
        await self.inner.put(fact)
        raise TimeoutError("the answer was lost after the vendor stored the fact")

    async def remove(self, external_id: str, fact: Fact) -> None:
        await self.inner.remove(external_id, fact)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class OrphanRules(StoreRules):
    """The failed-put cleanup rules (``held_ids``)."""

    __suite_root__ = True

    def require_held(self, store: Store) -> None:
        assert can_find_held(store) == ("held" in self.capabilities), (
            'declare "held" in capabilities exactly when the store has held_ids'
        )
        self.require("held")

    @rule("ST-4.2-held")
    async def test_held_ids_names_the_copies_of_a_fact(self, store: Store) -> None:
        """``held_ids(fact)`` names the copy ``put`` made (the id ``put`` returned, or its
        parts), nothing for a fact never put, and nothing once the copy is removed.

        Troubleshooting: look copies up by the ``factId`` in their custody metadata (a metadata
        filter, a tag, a key chosen from the fact id), never by searching the text; use only
        ``fact.fact_id`` and ``fact.space``. Return ids ``remove`` accepts. Raise when the
        vendor cannot answer: an empty list promises there is no copy.
        """
        self.require_held(store)
        fact, stranger = make_fact(), make_fact(subject="acct:43")
        # A neighbour with the same text, space and actor: only the fact id tells them apart.
        neighbour, neighbour_id = await self.put(store, make_fact())
        stored, external_id = await self.put(store, fact)
        held = await store.held_ids(fact)  # type: ignore[attr-defined]
        assert held, "held_ids finds nothing for a fact just put"
        assert all(isinstance(i, str) and i and i in external_id for i in held), (
            f"held_ids returned {held!r}; put returned {external_id!r} (another fact's copy "
            "named here would be removed by the cleanup of a failed put)"
        )
        assert await store.held_ids(stranger) == []  # type: ignore[attr-defined]
        await store.remove(external_id, stored)
        assert await store.held_ids(fact) == []  # type: ignore[attr-defined]
        assert await store.held_ids(neighbour), (  # type: ignore[attr-defined]
            f"held_ids no longer finds the neighbour {neighbour_id!r} of a removed fact"
        )

    @rule("ST-4.2-held-fail")
    async def test_held_ids_raises_when_the_vendor_fails(
        self, request: pytest.FixtureRequest
    ) -> None:
        """When the vendor answers errors, ``held_ids`` raises ``StoreError`` naming the store,
        never answers ``[]``; ``put_all`` then reports the copy as possibly held, not cleaned.

        Troubleshooting: an empty list promises the vendor holds no copy, and the core then
        leaves none to remove; let the SDK's error surface as ``StoreError(self.name, ...)``
        (``call_sdk`` does), as ``put`` and ``remove`` do.
        """
        self.require("fail")
        store: Store = request.getfixturevalue("failing_store")
        self.require_held(store)
        with pytest.raises(StoreError) as caught:
            held = await store.held_ids(make_fact())  # type: ignore[attr-defined]
            pytest.fail(f"held_ids answered {held!r} from a vendor that answers only errors")
        assert caught.value.store == store.name

    @rule("ST-4.2-orphan")
    async def test_copy_left_by_a_failed_put_is_removed(self, store: Store, backdoor: Any) -> None:
        """A put that raises after the vendor stored the fact (a timeout after the fact) leaves
        no copy: ``StoreSet.put_all`` finds it by the fact id, removes it, and reports
        ``removed a copy the failed put left`` (or ``removed N copies ...``) for the store, with
        the put's own error.

        Troubleshooting: ``held_ids`` must see a copy right after the vendor stored it (read
        your own write), and ``remove`` must accept each id it returns. A vendor whose listing
        lags behind its writes needs ``held_ids`` to wait (``kit.poll``) or read by key.
        """
        self.require_held(store)
        fact = make_fact()
        stores = StoreSet(
            [TimesOutAfterStoring(store)],  # type: ignore[list-item]
            VerifyPolicy(attempts=self.lag_max_checks, delay=0.05),
        )
        with pytest.raises(StoreWriteError) as caught:
            await stores.put_all(fact)
        assert "the answer was lost" in caught.value.message
        outcome = caught.value.compensation[store.name]
        # A vendor that splits one text into parts (Letta's passages) reports each part.
        assert re.fullmatch(r"removed (a copy|\d+ copies) the failed put left", outcome), outcome
        assert caught.value.owed == []
        assert await self.find(backdoor, fact.fact_id) is None, "the copy is still in the vendor"

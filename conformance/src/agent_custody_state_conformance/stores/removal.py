"""Store rules for removing (SPEC 4.2, 4.3, 6): remove, idempotence, twins, compensation, mirror.

After ``remove`` the vendor holds nothing for the fact, a second removal is harmless, a fact
with the same text as another is removed alone, a write refused by a later store is compensated,
and the core's custody flows (supersede, retract, forget) keep the store in step with a ledger.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent_custody_state import Ledger
from agent_custody_state.backends.memory import MemoryBackend as MemoryEventStore
from agent_custody_state.ledger.model import Fact
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.stores import (
    Store,
    StoreError,
    StoreSet,
    StoreWriteError,
    VerifyPolicy,
    fact_text,
)
from agent_custody_state.stores.base import can_verify
from agent_custody_state.stores.flows import Custody

from ..rules import rule
from .base import StoreRules, make_fact

__all__ = ["RemovalRules"]


class _RefusingStore:
    """A second store that refuses every write (drives compensation of the store under test)."""

    name = "refuser"

    async def put(self, fact: Fact) -> str:
        raise StoreError(self.name, "refused on purpose by the conformance suite")

    async def remove(self, external_id: str, fact: Fact) -> None:
        return None


class RemovalRules(StoreRules):
    """The removal rules (SPEC 4.2 compensation, 4.3 removal, 6 mirror flows)."""

    __suite_root__ = True

    # -- remove --------------------------------------------------------------------------------

    @rule("ST-4.3-remove")
    async def test_remove_makes_backdoor_miss(self, store: Store, backdoor: Any) -> None:
        """After ``remove(external_id, fact)`` the vendor holds nothing for the fact.

        Troubleshooting: delete by the id ``put`` returned; if the vendor deletes in the
        background, ``remove`` should still return only once the delete is accepted, and the
        backdoor must read the primary data, not a lagging index.
        """
        fact, external_id = await self.put(store, make_fact())
        assert await self.find(backdoor, fact.fact_id) is not None
        await store.remove(external_id, fact)
        assert await self.find(backdoor, fact.fact_id) is None

    @rule("ST-4.3-idempotent")
    async def test_remove_is_idempotent(self, store: Store, backdoor: Any) -> None:
        """Removing something already removed is not an error (retries and compensation
        repeat removals).

        Troubleshooting: treat the vendor's "not found" (404, zero rows deleted) as success;
        only real failures raise.
        """
        fact, external_id = await self.put(store, make_fact())
        await store.remove(external_id, fact)
        await store.remove(external_id, fact)
        assert await self.find(backdoor, fact.fact_id) is None

    @rule("ST-4.3-dedupe")
    async def test_equal_text_removed_separately(self, store: Store, backdoor: Any) -> None:
        """Two facts with the same text are two records: removing one leaves the other.

        Troubleshooting: a vendor that deduplicates by content hands back one id for both; put
        the fact id into what is stored (metadata, tags or the text) so each fact is its own
        record, and remove by the id recorded for that fact only.
        """
        first, first_id = await self.put(store, make_fact())
        second, second_id = await self.put(store, make_fact())
        assert fact_text(first) == fact_text(second)
        assert first_id != second_id, "two facts with equal text got the same external id"
        await store.remove(first_id, first)
        assert await self.find(backdoor, first.fact_id) is None
        survivor = await self.find(backdoor, second.fact_id)
        assert survivor is not None, "removing one fact removed its twin with the same text"
        self._check_content(survivor, second)
        if can_verify(store):
            assert await store.verify_removed(second_id, second) is False  # type: ignore[attr-defined]

    @rule("ST-4.2-compensate")
    async def test_compensation_removes_the_write(self, store: Store, backdoor: Any) -> None:
        """When a later store refuses a write, ``StoreSet.put_all`` removes the fact from this
        store again (compensation) and reports it ``removed``.

        Troubleshooting: ``remove`` must work right after ``put`` with the id ``put`` returned
        (no eventual-consistency gap between the two).
        """
        fact = make_fact()
        stores = StoreSet([store, _RefusingStore()])
        with pytest.raises(StoreWriteError) as caught:
            await stores.put_all(fact)
        assert caught.value.store == "refuser"
        assert caught.value.compensation[store.name] == "removed"
        assert await self.find(backdoor, fact.fact_id) is None

    @rule("ST-6-mirror")
    async def test_mirror_swaps_and_restores(self, store: Store, backdoor: Any) -> None:
        """Through the core's mirror flows with a ledger: a supersession removes the old value
        from the store, retracting the replacement puts the old value back under a new id
        recorded in the ledger, and forgetting it then leaves nothing.

        Troubleshooting: the store must accept a fact again after it was removed (an upsert
        keyed by the fact id must not be blocked by a tombstone or a content-hash dedupe),
        and ``remove`` must work with the id the put-back returned.
        """
        stores = StoreSet([store], VerifyPolicy(attempts=self.lag_max_checks, delay=0.01))
        with Ledger(MemoryEventStore("memory:")) as ledger:
            old = await self._write(ledger, stores, "pro", None)
            new = await self._write(ledger, stores, "enterprise", old.fact_id)
            assert await self.find(backdoor, old.fact_id) is None
            assert await self.find(backdoor, new.fact_id) is not None
            undo = await Custody(ledger, stores).retract(
                fact_id=new.fact_id, actor="auditor", reason="wrong plan"
            )
            assert undo.restored is not None and undo.restored.failed == {}
            assert await self.find(backdoor, new.fact_id) is None
            back = await self.find(backdoor, old.fact_id)
            assert back is not None, "retracting the replacement did not put the old value back"
            self._check_content(back, old)
            assert ledger.current_external(old.fact_id) == undo.restored.external
            if "id" in back:
                assert back["id"] == undo.restored.external[store.name]
            await Custody(ledger, stores).forget(fact_id=old.fact_id, actor="dpo", reason="gdpr")
            assert await self.find(backdoor, old.fact_id) is None

    async def _write(
        self, ledger: Ledger, stores: StoreSet, value: Any, supersedes: str | None
    ) -> Fact:
        fact = make_fact(value=value)
        report = await Custody(ledger, stores).write(
            AssertRequest(
                subject=fact.subject,
                predicate=fact.predicate,
                value=value,
                space=fact.space,
                actor=fact.actor,
                receipt_id=fact.source.receipt_id,
                provenance=fact.provenance,
                valid_from=fact.valid_from,
                fact_id=fact.fact_id,
                supersedes=supersedes,
            )
        )
        return report.event.fact

"""Store rules for proving a removal (SPEC 4.3) and for vendor errors (SPEC 4.2).

``verify_removed`` agrees with the backdoor, a store without it is reported ``unverified``, a
lagging index shows as ``stillIndexed`` until it catches up, and a failing vendor is reported
by name, never as success.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent_custody_state.ledger.facts import Forgotten
from agent_custody_state.stores import Store, StoreError, StoreSet, StoreWriteError, VerifyPolicy
from agent_custody_state.stores.base import can_verify, verifies_without_value

from ..rules import rule
from .base import StoreRules, make_fact

__all__ = ["VerificationRules"]


class VerificationRules(StoreRules):
    """The verification rules (SPEC 4.3) and the vendor-error rule (SPEC 4.2)."""

    __suite_root__ = True

    # -- verify --------------------------------------------------------------------------------

    @rule("ST-4.3-verify")
    async def test_verify_agrees_with_backdoor(self, store: Store, backdoor: Any) -> None:
        """``verify_removed`` answers False while the vendor holds the fact and True once it
        does not; through ``StoreSet.remove_all`` the outcome is ``verified``.

        Troubleshooting: check both the read by id and the vendor's search filtered by the fact
        id (an index may lag the primary data). Never answer True when the vendor could not be
        asked: raise instead, and the core reports it.
        """
        self.require("verify")
        fact, external_id = await self.put(store, make_fact())
        assert await store.verify_removed(external_id, fact) is False  # type: ignore[attr-defined]
        await store.remove(external_id, fact)
        assert await self.find(backdoor, fact.fact_id) is None
        assert await store.verify_removed(external_id, fact) is True  # type: ignore[attr-defined]
        again, _ = await self.put(store, make_fact())
        report = await StoreSet([store], VerifyPolicy(attempts=3, delay=0.01)).remove_all(again)
        assert report.removed_from == [store.name]
        assert report.verification == {store.name: "verified"}
        assert await self.find(backdoor, again.fact_id) is None

    @rule("ST-4.3-blind")
    async def test_verify_without_the_value(self, store: Store, backdoor: Any) -> None:
        """A store declaring ``verify_without_value = True`` answers ``verify_removed`` for a
        fact whose value was erased (as a forget finished from the outbox after a crash hands
        it over: value null, the forget's certificate on it) exactly as for the fact itself.

        Troubleshooting: declare it only when the check reads by id and by the fact id marker,
        never by the fact's text (a search by the text finds nothing once the value is erased,
        and would answer True while the vendor still holds the copy).
        """
        if not verifies_without_value(store):
            pytest.skip(
                "store does not declare verify_without_value (a forget finished from the "
                "outbox reports it unverified)"
            )
        self.require("verify")
        fact, external_id = await self.put(store, make_fact())
        erased = fact.with_(value=None, forgotten=Forgotten(None, "none", fact.valid_from))
        assert await store.verify_removed(external_id, erased) is False  # type: ignore[attr-defined]
        await store.remove(external_id, fact)
        assert await self.find(backdoor, fact.fact_id) is None
        assert await store.verify_removed(external_id, erased) is True  # type: ignore[attr-defined]

    @rule("ST-4.3-copies")
    async def test_verify_sees_every_copy(self, store: Store, backdoor: Any) -> None:
        """A second record of the same fact (an add retried after a timeout that had landed,
        a put-back) keeps ``verify_removed`` False after the first is removed, until the vendor
        holds nothing for the fact.

        Troubleshooting: the read by id is not enough; also search or list by the fact id marker
        (metadata, tag, key) and count any record of the fact, whatever its id. A store keyed
        by the fact id (an upsert) passes by holding one record only.
        """
        self.require("verify")
        fact = make_fact()
        held, first_id = await self.put(store, fact)
        _, second_id = await self.put(store, fact)
        await store.remove(first_id, held)
        if await self.find(backdoor, fact.fact_id) is not None:
            assert second_id != first_id, "remove left the record it was given"
            assert await store.verify_removed(first_id, held) is False, (  # type: ignore[attr-defined]
                "verify_removed answered True while the vendor still holds a copy of the fact"
            )
            await store.remove(second_id, held)
        assert await self.find(backdoor, fact.fact_id) is None
        assert await store.verify_removed(first_id, held) is True  # type: ignore[attr-defined]

    @rule("ST-4.3-unverified")
    async def test_without_verify_reports_unverified(self, store: Store, backdoor: Any) -> None:
        """A store that cannot verify is reported ``unverified`` after a removal, never
        ``verified``.

        Troubleshooting: only declare ``verify_removed`` when the vendor can really be asked.
        """
        if "verify" in self.capabilities:
            pytest.skip('store declares capability "verify"; ST-4.3-verify applies instead')
        fact, _ = await self.put(store, make_fact())
        report = await StoreSet([store]).remove_all(fact)
        assert report.removed_from == [store.name]
        assert report.verification == {store.name: "unverified"}
        assert await self.find(backdoor, fact.fact_id) is None

    @rule("ST-4.3-lag")
    async def test_lagging_index(self, request: pytest.FixtureRequest) -> None:
        """When the vendor's index lags, one verification attempt reports ``stillIndexed`` and
        enough attempts report ``verified``.

        Troubleshooting: ``verify_removed`` must consult the lagging part (search, list) and
        not only the read by id; and it must not cache an answer between calls.
        """
        self.require("lag")
        self.require("verify")
        store: Store = request.getfixturevalue("lagging_store")
        fact, _ = await self.put(store, make_fact())
        quick = await StoreSet([store], VerifyPolicy(attempts=1, delay=0)).remove_all(fact)
        assert quick.removed_from == [store.name]
        assert quick.verification == {store.name: "stillIndexed"}
        fact, _ = await self.put(store, make_fact(subject="acct:43"))
        patient = StoreSet([store], VerifyPolicy(attempts=self.lag_max_checks, delay=0.001))
        report = await patient.remove_all(fact)
        assert report.verification == {store.name: "verified"}

    # -- vendor errors -------------------------------------------------------------------------

    @rule("ST-4.2-errors")
    async def test_vendor_errors_name_the_store(self, request: pytest.FixtureRequest) -> None:
        """When the vendor answers errors, ``put``, ``remove`` and ``verify_removed`` raise
        ``StoreError`` whose ``store`` is the store's name; ``put_all`` fails naming it and the
        removal report lists it as ``failed`` in ``stillHeld``.

        Troubleshooting: catch the SDK's exceptions (HTTP errors, timeouts, driver errors) in
        the adapter and raise ``StoreError(self.name, message)``; never return an id or True
        from a failed call.
        """
        self.require("fail")
        store: Store = request.getfixturevalue("failing_store")
        fact = make_fact(external=None)
        with pytest.raises(StoreError) as caught:
            await store.put(fact)
        assert caught.value.store == store.name
        held = fact.with_(external={store.name: "an-id-the-vendor-cannot-confirm"})
        with pytest.raises(StoreError) as caught:
            await store.remove("an-id-the-vendor-cannot-confirm", held)
        assert caught.value.store == store.name
        if can_verify(store):
            with pytest.raises(StoreError) as caught:
                await store.verify_removed("an-id-the-vendor-cannot-confirm", held)  # type: ignore[attr-defined]
            assert caught.value.store == store.name
        with pytest.raises(StoreWriteError) as write_error:
            await StoreSet([store]).put_all(fact)
        assert write_error.value.store == store.name
        report = await StoreSet([store]).remove_all(held)
        assert report.removed_from == []
        assert set(report.still_held) == {store.name}
        assert report.verification == {store.name: "failed"}

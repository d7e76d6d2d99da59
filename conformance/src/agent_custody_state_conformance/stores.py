"""``StoreConformance``: the write-through store rules (SPEC 4.2, 4.3, 6), for any store plugin.

Subclass it once per store plugin and provide fixtures::

    class TestMyStore(StoreConformance):
        capabilities = frozenset({"verify", "lag", "fail"})

        @pytest.fixture
        def store(self, vendor):            # a fresh, empty Store
            return MyStore(name="mine", client=vendor.client())

        @pytest.fixture
        def backdoor(self, vendor):         # reads the vendor WITHOUT the adapter
            return MyBackdoor(vendor)

        @pytest.fixture
        def lagging_store(self, vendor):    # only with "lag" in capabilities
            vendor.lag_checks = 2
            return MyStore(name="mine", client=vendor.client())

        @pytest.fixture
        def failing_store(self, vendor):    # only with "fail" in capabilities
            vendor.fail = True
            return MyStore(name="mine", client=vendor.client())

The backdoor has one method, ``find(fact_id)`` (plain or ``async``), returning what the vendor
holds for that fact as a dict, or ``None`` when it holds nothing:

- ``"id"`` (optional): the vendor's own id for the record; compared with what ``put`` returned.
- ``"text"`` and/or ``"value"``: the text line (SPEC 6: ``"<subject> <predicate>: <value>"``)
  and/or the structured value, whichever the vendor keeps (at least one).
- ``"metadata"``: the custody metadata as stored (``factId, space, actor, provenance,
  receiptId, validFrom, source``); extra keys are fine.

Find by the fact id, not by the vendor id: a store that deduplicates by content must still keep
two facts apart, and a removal is only proven when nothing carrying the fact id is left.

``capabilities`` decides which rules apply; a rule whose capability is missing is skipped with a
reason saying so (SQLAlchemy's requirement style):

- ``"verify"``: the store implements ``verify_removed``.
- ``"lag"``: a ``lagging_store`` fixture: after a removal the vendor keeps the item visible to
  at least the first ``verify_removed`` call, and gone within ``lag_max_checks`` calls.
- ``"fail"``: a ``failing_store`` fixture whose vendor answers every call with an error.

Stores are async. Every rule is an ``async def`` test run by anyio's pytest plugin (installed
with anyio, which the core depends on) on asyncio; fixtures may be plain or ``async`` and share
the test's event loop, so an adapter may hold an async connection pool. Override the
``anyio_backend`` fixture to change the loop.

Every test has a rule id (``ST-...``, listed in ``docs/conformance.md``) and a docstring whose
second paragraph says what to look at when it fails. A plugin may deviate from a rule only by
overriding its test with ``@pytest.mark.xfail(reason=...)``.
"""

from __future__ import annotations

import inspect
import uuid
from typing import Any, ClassVar

import pytest
from agent_custody_state import Ledger
from agent_custody_state.backends.memory import MemoryBackend as MemoryEventStore
from agent_custody_state.canonical import canonical_json
from agent_custody_state.ledger.model import Fact, Source
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.stores import (
    Store,
    StoreError,
    StoreSet,
    StoreWriteError,
    VerifyPolicy,
    custody_metadata,
    fact_text,
)
from agent_custody_state.stores.base import can_verify
from agent_custody_state.stores.flows import Custody

from .rules import ConformanceSuite, rule

__all__ = ["StoreConformance", "make_fact"]

#: Every capability a suite subclass may declare.
CAPABILITIES = frozenset({"verify", "lag", "fail"})


def make_fact(**changes: Any) -> Fact:
    """A fact as the ledger would hand it to a store, with a fresh id and a receipt.

    Attested, with a receipt and a non-default space and actor, so that every custody field
    has a value a store could get wrong.
    """
    fact_id = changes.pop("fact_id", None) or str(uuid.uuid4())
    base: dict[str, Any] = {
        "fact_id": fact_id,
        "subject": "acct:42",
        "predicate": "plan",
        "value": "pro",
        "space": "team:support",
        "actor": "agent:billing",
        "source": Source(f"rcpt-{fact_id[:8]}"),
        "provenance": "attested",
        "valid_from": "2026-09-01T00:00:00.000Z",
    }
    base.update(changes)
    return Fact(**base)


#: A value that trips up encodings, escaping and size limits: astral-plane characters, a
#: combining accent, quotes, backslashes, control characters, nesting and ~16 KB of text.
AWKWARD_VALUE: dict[str, Any] = {
    "name": "Zoë \u00e9 e\u0301 \U0001f600 \u4e2d\u6587 \"quoted\" back\\slash \n\ttab",
    "nested": {"list": [1, 2.5, -0.0, 1e21, True, None, "\u2028"], "empty": {}},
    "notes": [f"\u00fc\u00df\u00e7 entry {i} \U0001f9ea" for i in range(1000)],
}


async def _resolve(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class _RefusingStore:
    """A second store that refuses every write (drives compensation of the store under test)."""

    name = "refuser"

    async def put(self, fact: Fact) -> str:
        raise StoreError(self.name, "refused on purpose by the conformance suite")

    async def remove(self, external_id: str, fact: Fact) -> None:
        return None


class StoreConformance(ConformanceSuite):
    """The write-through store suite. Provide ``store`` and ``backdoor``; see the module doc."""

    __suite_root__ = True

    #: What the store and its fixtures support (subset of ``CAPABILITIES``).
    capabilities: ClassVar[set[str] | frozenset[str]] = frozenset()
    #: With "lag": how many ``verify_removed`` calls at most until a removal shows.
    lag_max_checks: ClassVar[int] = 6

    pytestmark = pytest.mark.anyio

    # -- fixtures a plugin provides ----------------------------------------------------------

    @pytest.fixture
    def anyio_backend(self) -> str:
        return "asyncio"

    @pytest.fixture
    def store(self) -> Store:
        raise NotImplementedError("provide a `store` fixture returning a fresh, empty Store")

    @pytest.fixture
    def backdoor(self) -> Any:
        raise NotImplementedError(
            "provide a `backdoor` fixture: an object with find(fact_id) -> dict | None that "
            "reads the vendor without the adapter"
        )

    @pytest.fixture
    def lagging_store(self) -> Store:
        raise NotImplementedError('capability "lag" needs a `lagging_store` fixture')

    @pytest.fixture
    def failing_store(self) -> Store:
        raise NotImplementedError('capability "fail" needs a `failing_store` fixture')

    # -- helpers -------------------------------------------------------------------------------

    def require(self, capability: str) -> None:
        """Skip the calling rule, with a reason, unless the plugin declared ``capability``."""
        unknown = set(self.capabilities) - CAPABILITIES
        if unknown:
            raise TypeError(f"unknown store capabilities {sorted(unknown)}; "
                            f"known: {sorted(CAPABILITIES)}")
        if capability not in self.capabilities:
            pytest.skip(f'store does not declare capability "{capability}"')

    async def find(self, backdoor: Any, fact_id: str) -> dict[str, Any] | None:
        found = await _resolve(backdoor.find(fact_id))
        assert found is None or isinstance(found, dict), (
            f"backdoor.find must return a dict or None, got {type(found).__name__}"
        )
        return found

    async def put(self, store: Store, fact: Fact) -> tuple[Fact, str]:
        """Put and return the fact as the ledger would then record it (with ``external``)."""
        external_id = await store.put(fact)
        return fact.with_(external={store.name: external_id}), external_id

    # -- put -----------------------------------------------------------------------------------

    @rule("ST-6-name")
    async def test_store_has_a_name(self, store: Store) -> None:
        """The store has a non-empty string ``name`` and implements ``put`` and ``remove``.

        Troubleshooting: the factory receives ``name=`` (the ``[[stores]]`` table's name); keep it
        on the instance as ``self.name``. The ledger records external ids under that name.
        """
        assert isinstance(store.name, str) and store.name
        assert isinstance(store, Store), "put(fact) and remove(external_id, fact) are required"
        assert can_verify(store) == ("verify" in self.capabilities), (
            'declare "verify" in capabilities exactly when the store has verify_removed'
        )

    @rule("ST-6-put-id")
    async def test_put_returns_id(self, store: Store, backdoor: Any) -> None:
        """``put`` returns a non-empty string id; the vendor holds a record for the fact under
        that id, and two different facts get two different ids.

        Troubleshooting: return the vendor's own id for the record (what ``remove`` needs),
        not the fact id unless the vendor is keyed by it. A vendor that answers asynchronously
        must be waited on (or polled) until the id is known.
        """
        fact = make_fact()
        _, external_id = await self.put(store, fact)
        assert isinstance(external_id, str) and external_id, f"put returned {external_id!r}"
        record = await self.find(backdoor, fact.fact_id)
        assert record is not None, "the backdoor finds nothing for the fact just put"
        if "id" in record:
            assert record["id"] == external_id
        other = make_fact(subject="acct:43")
        _, other_id = await self.put(store, other)
        assert other_id != external_id

    @rule("ST-6-text")
    async def test_put_text(self, store: Store, backdoor: Any) -> None:
        """What lands is the SPEC 6 text ``"<subject> <predicate>: <value>"`` (the value as-is
        when a string, else its JSON), and/or the structured value.

        Troubleshooting: use ``agent_custody_state.stores.fact_text(fact)``; do not build the line
        yourself. A backdoor must report ``text`` or ``value`` (or both).
        """
        for value in ("pro", {"tier": "pro", "seats": 5}, 42, None, [1, "two"]):
            fact = make_fact(value=value)
            await self.put(store, fact)
            record = await self.find(backdoor, fact.fact_id)
            assert record is not None
            self._check_content(record, fact)

    def _check_content(self, record: dict[str, Any], fact: Fact) -> None:
        assert "text" in record or "value" in record, "backdoor reports neither text nor value"
        if "text" in record:
            assert record["text"] == fact_text(fact)
        if "value" in record:
            assert canonical_json(record["value"]) == canonical_json(fact.value)

    @rule("ST-6-custody")
    async def test_put_custody_metadata(self, store: Store, backdoor: Any) -> None:
        """Every custody field lands beside the text: factId, space, actor, provenance,
        receiptId, validFrom and source ``"agent-custody"``, with the fact's exact values.

        Troubleshooting: use ``agent_custody_state.stores.custody_metadata(fact)``. A vendor that
        stores metadata as strings or tags needs a backdoor that decodes them back; a vendor
        that cannot keep some field must xfail this rule with the reason.
        """
        fact = make_fact()
        await self.put(store, fact)
        record = await self.find(backdoor, fact.fact_id)
        assert record is not None
        stored = record.get("metadata")
        assert isinstance(stored, dict), "backdoor reports no metadata dict"
        expected = custody_metadata(fact)
        assert {k: stored.get(k) for k in expected} == expected
        claimed = make_fact(provenance="claimed", source=Source(None))
        await self.put(store, claimed)
        record = await self.find(backdoor, claimed.fact_id)
        assert record is not None
        assert record["metadata"].get("receiptId") is None
        assert record["metadata"].get("provenance") == "claimed"

    @rule("ST-6-roundtrip")
    async def test_awkward_value_round_trip(self, store: Store, backdoor: Any) -> None:
        """A value with unicode (astral plane, combining marks, U+2028), quotes, backslashes,
        control characters and ~16 KB of JSON survives the round trip unchanged.

        Troubleshooting: send UTF-8 (not ASCII escapes that the vendor stores literally), do not
        truncate, and do not re-serialise the text with another JSON encoder.
        """
        fact = make_fact(subject="user:zoë", value=AWKWARD_VALUE)
        assert len(fact_text(fact)) > 16_000
        await self.put(store, fact)
        record = await self.find(backdoor, fact.fact_id)
        assert record is not None
        self._check_content(record, fact)
        assert record["metadata"].get("factId") == fact.fact_id

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
        assert caught.value.compensation == {store.name: "removed"}
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
            undo = await Custody(ledger, stores).retract(fact_id=new.fact_id, actor="auditor",
                                                         reason="wrong plan")
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
        report = await Custody(ledger, stores).write(AssertRequest(
            subject=fact.subject, predicate=fact.predicate, value=value, space=fact.space,
            actor=fact.actor, receipt_id=fact.source.receipt_id, provenance=fact.provenance,
            valid_from=fact.valid_from, fact_id=fact.fact_id, supersedes=supersedes,
        ))
        return report.event.fact

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

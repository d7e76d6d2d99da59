"""Store rules for writing (SPEC 6): ``put``'s id, the text, the custody metadata, odd values.

What lands in the vendor after ``put``, read back through the plugin's backdoor: a record under
the id ``put`` returned, the SPEC 6 text or the structured value, every custody field, and a
value full of unicode and escapes surviving unchanged.
"""

from __future__ import annotations

from typing import Any

from agent_custody_state.ledger.model import Source
from agent_custody_state.stores import Store, custody_metadata, fact_text
from agent_custody_state.stores.base import can_verify

from ..rules import rule
from .base import AWKWARD_VALUE, StoreRules, make_fact

__all__ = ["WriteRules"]


class WriteRules(StoreRules):
    """The put rules (SPEC 6)."""

    __suite_root__ = True

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

"""Store rules for writing (SPEC 6): ``put``'s id, the text, the custody metadata, odd values,
a refusal told before any store is written (``refusal``), and ``where`` (the container the
copies go into).

What lands in the vendor after ``put``, read back through the plugin's backdoor: a record under
the id ``put`` returned, the SPEC 6 text or the structured value, every custody field, and a
value full of unicode and escapes surviving unchanged.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import pytest

from agent_custody_state.ledger.model import Source
from agent_custody_state.stores import (
    Store,
    StoreError,
    StoreSet,
    StoreWriteError,
    custody_metadata,
    fact_text,
)
from agent_custody_state.stores.base import can_refuse, can_verify, redact
from agent_custody_state.stores.residual import residual_of

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

    @rule("ST-6-unholdable")
    async def test_text_no_store_can_hold_is_put_and_removed(
        self, store: Store, backdoor: Any
    ) -> None:
        """A string the ledger accepts but no store can hold as text (U+0000, which PostgreSQL's
        ``text`` and ``jsonb`` refuse; a lone surrogate, which UTF-8 cannot encode) in a value,
        an actor or a receipt id is put, holds what ``fact_text`` and ``custody_metadata`` give
        (its JSON text), and is removed.

        Troubleshooting: send ``fact_text(fact)`` and ``custody_metadata(fact)``; a value's
        strings sent in a shape of your own go through ``holdable_text`` (``original_text``
        reads them back), both in ``agent_custody_state.plugin``. A raw driver or encoding
        error here fails every write of such a fact.
        """
        for changes in (
            {"value": "a\x00b"},
            {"value": "x\ud800y"},
            {"actor": "ag\x00ent", "source": Source("r\x00c")},
        ):
            fact = make_fact(**changes)
            recorded, external_id = await self.put(store, fact)
            record = await self.find(backdoor, fact.fact_id)
            assert record is not None, f"nothing held for {changes!r}"
            if "text" in record:
                assert record["text"] == fact_text(fact), changes
            stored = record.get("metadata")
            if isinstance(stored, dict):
                expected = custody_metadata(fact)
                assert {k: stored.get(k) for k in expected} == expected, changes
            await store.remove(external_id, recorded)
            assert await self.find(backdoor, fact.fact_id) is None, f"still held: {changes!r}"

    # -- refusal -----------------------------------------------------------------------------

    @rule("ST-4.2-refusal")
    async def test_refusal_agrees_with_put(self, store: Store, backdoor: Any) -> None:
        """A store declaring ``refusal(fact)`` answers None or a non-empty text, and agrees
        with its ``put``: a fact it names is refused by ``put`` too (``StoreError`` naming the
        store), with nothing held, and by ``StoreSet.put_all`` with its reason before any
        store is written; a fact it does not name is put. Tried on an ordinary fact, spaces
        with "." and ``langgraph``, the awkward ~16 KB value and a 100,000-character value.

        Troubleshooting: make ``put`` call the same check (``StoreError(self.name, reason)``)
        and name in ``refusal`` every limit ``put`` refuses before or after the vendor call
        (a size cap, a name the vendor forbids), from the fact and the settings alone. A store
        without ``refusal`` is skipped.
        """
        if not can_refuse(store):
            pytest.skip("store does not declare refusal")
        for changes in (
            {},
            {"space": "acme.com"},
            {"space": "langgraph"},
            {"value": AWKWARD_VALUE},
            {"value": "x" * 100_000},
        ):
            fact = make_fact(**changes)
            answer = store.refusal(fact)  # type: ignore[attr-defined]
            if inspect.isawaitable(answer):
                answer = await answer
            shown = {k: (v if len(str(v)) < 40 else "...") for k, v in changes.items()}
            assert answer is None or (isinstance(answer, str) and answer.strip()), (
                f"refusal answered {answer!r} for {shown}, not None or a reason"
            )
            if answer is None:
                recorded, external_id = await self.put(store, fact)
                assert await self.find(backdoor, fact.fact_id) is not None, shown
                await store.remove(external_id, recorded)
                continue
            with pytest.raises(StoreError) as put_refused:
                await store.put(fact)
            assert put_refused.value.store == store.name, shown
            assert await self.find(backdoor, fact.fact_id) is None, f"refused yet held: {shown}"
            with pytest.raises(StoreWriteError) as caught:
                await StoreSet([store]).put_all(fact)
            refused = caught.value
            assert (refused.store, refused.message) == (store.name, redact(answer)), shown
            assert refused.compensation == {} and refused.owed == [], shown

    # -- where -------------------------------------------------------------------------------

    def _check_where(self, store: Store) -> str:
        where = getattr(store, "where", None)
        assert isinstance(where, str) and where.strip(), f"where is {where!r}, not a text"
        assert "\n" not in where and len(where) <= 1000, "where must be one short line"
        assert getattr(store, "where", None) == where, "where changed between two reads"
        assert redact(where) == where, f"where holds a secret or a URL password: {where!r}"
        assert not re.search(r"://[^\s/]*@", where), f"where holds URL userinfo: {where!r}"
        assert "?" not in where, f"where holds a URL query (tokens live there): {where!r}"
        return where

    @rule("ST-6-where")
    async def test_where_names_no_secret(self, store: Store) -> None:
        """A store declaring ``where`` gives one short, stable line with no secret in it: no
        credential it read (``kit.secret_from_env``), no URL userinfo, no URL query.

        Troubleshooting: build it from the settings alone (endpoint origin and path, container
        id), never from a connection string as given: drop ``user:password@``, ``?query`` and
        ``password=``. The ledger keeps it with every fact, where anyone reading the ledger sees
        it. A store without ``where`` is skipped.
        """
        if getattr(store, "where", None) is None:
            pytest.skip("store does not declare where")
        self._check_where(store)

    @rule("ST-6-where-moves")
    async def test_another_container_gives_another_where(
        self, store: Store, request: pytest.FixtureRequest
    ) -> None:
        """Built with another container setting, the store gives another ``where`` (and one
        as clean): a forget then refuses to report a copy at the old place as removed.

        Troubleshooting: name every setting that decides where a copy goes (graph, agent,
        table and database, user and agent scope, namespace, server); two settings that write
        to different places must never give the same text.
        """
        self.require("relocate")
        relocated_store: Store = request.getfixturevalue("relocated_store")
        assert self._check_where(store) != self._check_where(relocated_store), (
            "two stores writing to different containers give the same where"
        )

    # -- residual ----------------------------------------------------------------------------

    @rule("ST-6-residual")
    async def test_residual_windows_are_texts_without_secrets(self, store: Store) -> None:
        """A store declaring ``residual`` (where a copy it removed may remain: its database's
        old row versions and WAL, the vendor's backups, what it derived from the text, the
        embedding model's logs) gives a list of ``{"where", "until"}`` texts, the same at every
        read, with no secret in them: erasure certificates carry them.

        Troubleshooting: build them from the settings alone, with the helpers of
        ``agent_custody_state.plugin`` (``postgres_table``, ``sqlite_file``,
        ``service_copies``, ``embedding_provider``, ``residual_window``); a declaration of
        another shape is certified as "declares nothing". A store without ``residual`` is
        skipped (its certificates say so).
        """
        declared = getattr(store, "residual", None)
        if declared is None:
            pytest.skip("store does not declare residual")
        windows = [dict(w) for w in declared]
        assert windows, "residual is empty: a removed copy leaves nothing anywhere?"
        assert residual_of(store) == windows, f"residual is not a list of where/until: {windows}"
        assert [dict(w) for w in getattr(store, "residual", ())] == windows, "residual changed"
        for w in windows:
            for text in w.values():
                assert redact(text) == text, f"residual holds a secret or URL password: {text!r}"
                assert not re.search(r"://[^\s/]*@", text), f"residual holds userinfo: {text!r}"

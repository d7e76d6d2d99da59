"""What every group of store rules shares: the fixtures a plugin provides, helpers, test data.

``StoreRules`` declares the fixtures (``store``, ``backdoor``, ``lagging_store``,
``failing_store``, ``relocated_store``, ``late_write``) and the ``capabilities`` a plugin sets, and the helpers the rules use
(``require``, ``find``, ``put``); ``make_fact`` and ``AWKWARD_VALUE`` are the facts they store.
"""

from __future__ import annotations

import inspect
import uuid
from typing import Any, ClassVar

import pytest

from agent_custody_state.canonical import canonical_json
from agent_custody_state.ledger.model import Fact, Source
from agent_custody_state.stores import Store, fact_text

from ..rules import ConformanceSuite

__all__ = ["AWKWARD_VALUE", "CAPABILITIES", "StoreRules", "make_fact"]

#: Every capability a suite subclass may declare.
CAPABILITIES = frozenset({"verify", "lag", "fail", "held", "relocate", "late"})


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
    "name": 'Zoë \u00e9 e\u0301 \U0001f600 \u4e2d\u6587 "quoted" back\\slash \n\ttab',
    "nested": {"list": [1, 2.5, -0.0, 1e21, True, None, "\u2028"], "empty": {}},
    "notes": [f"\u00fc\u00df\u00e7 entry {i} \U0001f9ea" for i in range(1000)],
}


async def _resolve(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class StoreRules(ConformanceSuite):
    """Base of the rule groups of ``StoreConformance``: fixtures and helpers, no rules."""

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

    @pytest.fixture
    def relocated_store(self) -> Store:
        raise NotImplementedError(
            'capability "relocate" needs a `relocated_store` fixture: the store built with '
            "another container setting (graph, agent, table, user, namespace, server)"
        )

    @pytest.fixture
    def late_write(self) -> Any:
        raise NotImplementedError(
            'capability "late" needs a `late_write` fixture returning a stores.LateWrite'
        )

    # -- helpers -------------------------------------------------------------------------------

    def require(self, capability: str) -> None:
        """Skip the calling rule, with a reason, unless the plugin declared ``capability``."""
        unknown = set(self.capabilities) - CAPABILITIES
        if unknown:
            raise TypeError(
                f"unknown store capabilities {sorted(unknown)}; known: {sorted(CAPABILITIES)}"
            )
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

    def _check_content(self, record: dict[str, Any], fact: Fact) -> None:
        assert "text" in record or "value" in record, "backdoor reports neither text nor value"
        if "text" in record:
            assert record["text"] == fact_text(fact)
        if "value" in record:
            assert canonical_json(record["value"]) == canonical_json(fact.value)

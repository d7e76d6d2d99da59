"""What every group of event-backend rules shares: the fixtures a test gets and one helper.

A plugin overrides ``store_factory``; ``clock`` (a :class:`~..clock.StepClock`, so transaction
times are distinct and predictable) and ``ledger`` (a ledger on a fresh store) follow from it;
``shredded`` is a crypto-shred ledger on a fresh store, with the key store ``key_store_factory``
gives (a plugin whose default key store needs preparing overrides that fixture).
``_assert`` asserts a fact with defaults for every argument the test does not care about.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state.ledger.keystore import KeyStore
from agent_custody_state.ledger.model import AssertEvent

from ..clock import StepClock
from ..rules import ConformanceSuite

__all__ = ["BackendRules", "KeyStoreFactory", "StoreFactory", "fact_ids", "original_assert"]

StoreFactory = Callable[..., EventBackend]

#: ``factory(backend)``: the key store for a crypto-shred ledger over ``backend`` (a KeyStore,
#: a location, or None for the backend's default).
KeyStoreFactory = Callable[[EventBackend], KeyStore | str | None]


def fact_ids(facts: list[Any]) -> list[str]:
    """The fact ids of facts (or events), in order."""
    return [f.fact_id for f in facts]


def original_assert(event_id: str, **fact: Any) -> dict[str, Any]:
    """An assert as the TypeScript original writes it (no chain record, salt, commitment or
    envelope), as its wire dict: the fact's fields given over defaults."""
    return {
        "eventId": event_id,
        "kind": "assert",
        "txTime": "2026-01-01T00:00:00.000Z",
        "fact": {
            "factId": f"f-{event_id}",
            "subject": "acct:42",
            "predicate": "plan",
            "value": "pro",
            "space": "org",
            "actor": "agent",
            **fact,
            "source": {"receiptId": None},
            "provenance": "claimed",
            "validFrom": "2026-01-01T00:00:00.000Z",
            "validTo": None,
            "confidence": None,
        },
        "supersedes": None,
    }


class BackendRules(ConformanceSuite):
    """Base of the rule groups of ``EventBackendConformance``: fixtures and helpers, no rules."""

    @pytest.fixture
    def store_factory(self) -> StoreFactory:
        raise NotImplementedError("provide a store_factory fixture: factory(name='ledger')")

    @pytest.fixture
    def clock(self) -> StepClock:
        return StepClock()

    @pytest.fixture
    def ledger(self, store_factory: StoreFactory, clock: StepClock) -> Iterator[Ledger]:
        with Ledger(store_factory(), clock=clock) as ledger:
            yield ledger

    @pytest.fixture
    def key_store_factory(self) -> KeyStoreFactory:
        return lambda backend: None

    @pytest.fixture
    def shredded(
        self, store_factory: StoreFactory, clock: StepClock, key_store_factory: KeyStoreFactory
    ) -> Iterator[Ledger]:
        backend = store_factory("shred")
        with Ledger(
            backend, clock=clock, forget_mode="crypto-shred", key_store=key_store_factory(backend)
        ) as ledger:
            yield ledger

    def _open(self, backend: EventBackend, factory: KeyStoreFactory, **kw: Any) -> Ledger:
        """A crypto-shred ledger over ``backend``, its key store from ``factory`` unless given."""
        key_store = kw.pop("key_store", None) or factory(backend)
        return Ledger(backend, forget_mode="crypto-shred", key_store=key_store, **kw)

    def _assert(self, ledger: Ledger, **kw: Any) -> AssertEvent:
        args: dict[str, Any] = {
            "subject": "acct:42",
            "predicate": "plan",
            "value": "pro",
            "space": "org",
            "actor": "agent",
        }
        args.update(kw)
        return ledger.assert_fact(**args)

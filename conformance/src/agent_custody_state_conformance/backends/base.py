"""What every group of event-backend rules shares: the fixtures a test gets and one helper.

A plugin overrides ``store_factory``; ``clock`` (a :class:`~..clock.StepClock`, so transaction
times are distinct and predictable) and ``ledger`` (a ledger on a fresh store) follow from it.
``_assert`` asserts a fact with defaults for every argument the test does not care about.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state.ledger.model import AssertEvent

from ..clock import StepClock
from ..rules import ConformanceSuite

__all__ = ["BackendRules", "StoreFactory", "fact_ids"]

StoreFactory = Callable[..., EventBackend]


def fact_ids(facts: list[Any]) -> list[str]:
    """The fact ids of facts (or events), in order."""
    return [f.fact_id for f in facts]


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

"""The store declares how long an add it did not see answered may still land in Cognee.

``resume`` after a restart reads it (``Store.settle_seconds``, through the core's
``settle_seconds_of``) to keep a failed put's cleanup owed that long: the store's own record of
the add is gone with the process.
"""

from __future__ import annotations

from collections.abc import Callable

from agent_custody_state.stores.base import settle_seconds_of
from agent_custody_state_cognee.store import CogneeStore


def test_the_store_declares_its_settle_time(make_store: Callable[..., CogneeStore]) -> None:
    assert settle_seconds_of(make_store()) == 600.0
    assert settle_seconds_of(make_store(add_settle_seconds=5)) == 5.0
    assert settle_seconds_of(make_store(add_settle_seconds=0)) == 0.0

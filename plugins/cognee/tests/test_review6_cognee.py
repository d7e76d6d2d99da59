"""Sixth review: Cognee answers 404 for a dataset the credentials may not read, as for one that
is gone, so a 404 must not verify a removal."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent_custody_state.stores import StoreSet, VerifyPolicy
from agent_custody_state_cognee.store import CogneeStore, split_external_id
from agent_custody_state_cognee.testing import FakeCognee
from agent_custody_state_conformance.stores import make_fact

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_dataset_answering_404_does_not_verify_the_removal(
    fake: FakeCognee, make_store: Callable[..., CogneeStore]
) -> None:
    stores = StoreSet([make_store()], VerifyPolicy(attempts=1, delay=0))
    fact = make_fact()
    external = await stores.put_all(fact)
    dataset_id, data_id = split_external_id(external["cognee"])
    fake.unreadable.add(dataset_id)  # the key lost its read permission; the item stays
    report = await stores.remove_all(fact.with_(external=external))
    assert data_id in fake.items
    assert report.verification == {"cognee": "unverified"}  # before the fix: "verified"


async def test_a_readable_dataset_still_verifies(
    fake: FakeCognee, make_store: Callable[..., CogneeStore]
) -> None:
    stores = StoreSet([make_store()], VerifyPolicy(attempts=1, delay=0))
    fact = make_fact()
    external = await stores.put_all(fact)
    report = await stores.remove_all(fact.with_(external=external))
    assert report.verification == {"cognee": "verified"}
    assert fake.items == {}

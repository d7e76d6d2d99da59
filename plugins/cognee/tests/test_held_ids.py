"""``held_ids``: the copies of a fact a failed put may have left, found by the fact id."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent_custody_state_cognee.store import CogneeStore
from agent_custody_state_cognee.testing import FakeCognee
from agent_custody_state_conformance.stores import make_fact

pytestmark = pytest.mark.anyio

MakeStore = Callable[..., CogneeStore]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_dataset_named_but_never_answered_is_found_by_name(
    fake: FakeCognee, make_store: MakeStore
) -> None:
    # The put that landed never answered, so this store never learnt the dataset's id.
    fact = make_fact()
    external_id = await make_store(dataset_name="team").put(fact)
    fresh = make_store(dataset_name="team")
    assert fresh.dataset_id is None
    assert await fresh.held_ids(fact) == [external_id]
    assert await fresh.held_ids(make_fact()) == []


async def test_no_dataset_of_that_name_holds_nothing(
    fake: FakeCognee, make_store: MakeStore
) -> None:
    assert await make_store(dataset_name="never-written").held_ids(make_fact()) == []

"""Fixtures: a loopback Cognee fake, and stores built the way the server builds them.

Stores come from the registered factory (``build``) with validated settings, so credentials are
read from named environment variables and every call crosses real HTTP to the fake.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent_custody_state_cognee.settings import CogneeSettings
from agent_custody_state_cognee.store import CogneeStore, build, strip_marker
from agent_custody_state_cognee.testing import FakeCognee

KEY, TOKEN = "test-key", "test-token"
KEY_ENV, TOKEN_ENV = "ACS_TEST_COGNEE_KEY", "ACS_TEST_COGNEE_TOKEN"


class CogneeBackdoor:
    """Reads the fake's primary data (not its lagging listing) by ``externalMetadata.factId``."""

    def __init__(self, fake: FakeCognee) -> None:
        self.fake = fake

    def items(self, fact_id: str) -> list[dict[str, Any]]:
        with self.fake.lock:
            return [
                dict(item)
                for item in self.fake.items.values()
                if item["externalMetadata"].get("factId") == fact_id
            ]

    def find(self, fact_id: str) -> dict[str, Any] | None:
        items = self.items(fact_id)
        if not items:
            return None
        assert len(items) == 1, f"fact {fact_id} is held by {len(items)} items"
        item = items[0]
        content = self.fake.raw_data[item["id"]].decode()
        text = strip_marker(content, fact_id)
        assert text is not None, f"content of fact {fact_id} lacks its marker: {content!r}"
        return {
            "id": f"{item['datasetId']}/{item['id']}",
            "text": text,
            "metadata": item["externalMetadata"],
            "label": item["label"],
        }


@pytest.fixture
def fake() -> Iterator[FakeCognee]:
    with FakeCognee(api_key=KEY, token=TOKEN) as server:
        yield server


@pytest.fixture
def make_store(fake: FakeCognee, monkeypatch: pytest.MonkeyPatch) -> Callable[..., CogneeStore]:
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setenv(TOKEN_ENV, TOKEN)

    def make(name: str = "cognee", **settings: Any) -> CogneeStore:
        options: dict[str, Any] = {"url": fake.url, "api_key_env": KEY_ENV, **settings}
        if "dataset_id" not in options and "dataset_name" not in options:
            options["dataset_name"] = "custody"
        return build(CogneeSettings(**options), name=name)

    return make


@pytest.fixture
def cognee_backdoor(fake: FakeCognee) -> CogneeBackdoor:
    return CogneeBackdoor(fake)

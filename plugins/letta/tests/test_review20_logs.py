"""Twentieth review: a write and forget through Letta log no value, at any level.

``letta-client`` logs each request's options (the passage text, the search query) and URL at
DEBUG, and httpx logs the URL at INFO: the check after a forget searches for the forgotten text
with a ``GET``, so its query carried the value into the log after the erasure.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from agent_custody_state import AssertRequest, Ledger
from agent_custody_state.stores import StoreSet, VerifyPolicy
from agent_custody_state.stores.flows import Custody
from agent_custody_state_letta.store import LettaStore

SECRET = "Geheimnis Zürich 4711"


def test_no_log_record_carries_the_value(
    make_store: Callable[..., LettaStore], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = make_store()

    async def scenario() -> None:
        with Ledger(tmp_path / "l.jsonl") as ledger:
            custody = Custody(ledger, StoreSet([store], VerifyPolicy(1, 0)))
            request = AssertRequest(subject="s", predicate="p", value=SECRET, space="o", actor="a")
            written = await custody.write(request)
            await custody.forget(fact_id=written.event.fact.fact_id, actor="a", reason="r")

    with caplog.at_level(logging.DEBUG):
        anyio.run(scenario)
    logged = [(r.name, r.getMessage()) for r in caplog.records]
    assert any(name == "httpx" and "search?***" in m for name, m in logged)
    assert any(m.startswith("Request options: {'method': 'post'") for _, m in logged)
    forms = ("Geheimnis", "Z%C3%BCrich", "4711")
    assert [m for _, m in logged if any(form in m for form in forms)] == []

"""Twentieth review, part 2: mem0's local ``Memory`` logs no value through this store.

``mem0.memory.main`` logs the text it stores in f-strings (``Creating memory with data='<text>'``
at DEBUG, ``Updating memory ...`` at INFO): every program logging at that level had each fact's
value in its log, where no forget reaches. The store masks the text it sends
(``plugin.withholding``) in the records of every ``mem0`` logger it guards.
"""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import pytest
from conftest import local_settings

from agent_custody_state import AssertRequest, Ledger
from agent_custody_state.plugin import withholding
from agent_custody_state.stores import StoreSet, VerifyPolicy
from agent_custody_state.stores.flows import Custody
from agent_custody_state_mem0.store import build

SECRET = "Geheimnis Zürich 4711 HIV positive"
MASK = "[value withheld]"


def test_a_write_and_forget_through_local_mem0_log_no_value(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = build(local_settings(tmp_path), name="mem0-local")

    async def scenario() -> None:
        with Ledger(tmp_path / "l.jsonl") as ledger:
            custody = Custody(ledger, StoreSet([store], VerifyPolicy(1, 0)))
            request = AssertRequest(subject="s", predicate="p", value=SECRET, space="o", actor="a")
            written = await custody.write(request)
            removal = await custody.forget(
                fact_id=written.event.fact.fact_id, actor="a", reason="r"
            )
            assert removal.removal.verification == {"mem0-local": "verified"}

    try:
        with caplog.at_level(logging.DEBUG):
            anyio.run(scenario)
    finally:
        store.close()
    logged = [(r.name, r.getMessage()) for r in caplog.records]
    assert ("mem0.memory.main", f"Creating memory with data='{MASK}'") in logged
    assert [m for _, m in logged if "Geheimnis" in m or "4711" in m] == []


def test_every_mem0_logger_is_guarded(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A logger's filter sees only its own records: each ``mem0`` logger there is is guarded,
    the vector store's too, and a record quoting the text while it is sent is masked."""
    store = build(local_settings(tmp_path), name="mem0-local")
    store.close()
    names = [n for n in logging.root.manager.loggerDict if n.split(".")[0] == "mem0"]
    assert "mem0.vector_stores.qdrant" in names
    with caplog.at_level(logging.INFO), withholding(f"s p: {SECRET}", SECRET):
        for name in names:
            logging.getLogger(name).info("Updating memory with data=%r", f"s p: {SECRET}")
    assert [r.getMessage() for r in caplog.records] == [
        f"Updating memory with data='{MASK}'"
    ] * len(names)

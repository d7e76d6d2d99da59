"""End to end: ``agent-custody-memory serve --config memory.toml`` over stdio, with a pgvector
store and a LangGraph PostgresStore configured, driven by the official ``mcp`` client acting as
the receipts gateway. Every check reads the PostgreSQL tables directly (backdoor scans).

Needs both store plugins and the embedded PostgreSQL (``nox -s stores_e2e``).
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agent_custody_state_pgvector", reason="needs agent-custody-state-pgvector")
pytest.importorskip("agent_custody_state_langgraph", reason="needs agent-custody-state-langgraph")
pytest.importorskip("langgraph.store.postgres", reason="needs langgraph-checkpoint-postgres")
psycopg = pytest.importorskip("psycopg", reason="needs psycopg 3")

from agent_custody_state_conformance.gateway import GatewayClient  # noqa: E402

from .endtoend import write_config  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

STORES = [
    {
        "name": "vectors",
        "type": "pgvector",
        "dsn_env": "E2E_PG_URL",
        "table": "custody_facts",
        "dimensions": 8,
        "embed": "agent_custody_state_conformance.embeddings:embed_8",
    },
    {
        "name": "langmem",
        "type": "langgraph",
        "backend": "postgres",
        "dsn_env": "E2E_PG_URL",
        "namespace": ["memories", "{space}"],
        "index_dimensions": 8,
        "index_embed": "agent_custody_state_conformance.embeddings:embed_texts_8",
    },
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def scan(url: str) -> dict[str, list[Any]]:
    """Everything both stores hold, read straight from their tables."""
    with psycopg.connect(url) as conn:
        vectors = conn.execute(
            "SELECT id, text, metadata FROM custody_facts ORDER BY id"
        ).fetchall()
        items = conn.execute("SELECT prefix, key, value FROM store ORDER BY key").fetchall()
        embedded = conn.execute("SELECT prefix, key FROM store_vectors ORDER BY key").fetchall()
    return {"vectors": vectors, "langmem": items, "langmem_vectors": embedded}


def texts(url: str) -> dict[str, set[str]]:
    held = scan(url)
    return {
        "vectors": {row[1] for row in held["vectors"]},
        "langmem": {row[2]["content"] for row in held["langmem"]},
    }


async def test_write_supersede_retract_forget(tmp_path: Path, postgres_url: str) -> None:
    ledger = tmp_path / "ledger.jsonl"
    config = write_config(
        tmp_path, ledger=ledger, stores=STORES, verify={"attempts": 3, "delay_ms": 10}
    )
    old_value, new_value = f"pro-{uuid.uuid4().hex[:8]}", f"enterprise-{uuid.uuid4().hex[:8]}"
    write = {"subject": "acct:42", "predicate": "plan", "space": "team:support"}
    async with GatewayClient.stdio(
        "serve",
        "--config",
        str(config),
        agent="billing-agent",
        env={"E2E_PG_URL": postgres_url},
        errlog=sys.stderr,
    ) as gw:
        first = await gw.call("memory.write", {**write, "value": old_value})
        assert not first.is_error, first.text
        fact = first.data["fact"]
        assert fact["external"] == {"vectors": fact["factId"], "langmem": fact["factId"]}
        held = scan(postgres_url)
        assert [row[0] for row in held["vectors"]] == [fact["factId"]]
        assert held["vectors"][0][2] == {
            "factId": fact["factId"],
            "space": "team:support",
            "actor": "billing-agent",
            "provenance": "attested",
            "receiptId": first.receipt,
            "validFrom": fact["validFrom"],
            "source": "agent-custody",
        }
        assert [(row[0], row[1]) for row in held["langmem"]] == [
            ("memories.team:support", fact["factId"])
        ]
        assert held["langmem"][0][2]["value"] == old_value

        # A supersession swaps the value in both stores.
        second = await gw.call(
            "memory.write", {**write, "value": new_value, "supersedes": fact["factId"]}
        )
        assert not second.is_error, second.text
        assert second.data["mirror"]["verification"] == {
            "vectors": "verified",
            "langmem": "verified",
        }
        swapped = f"acct:42 plan: {new_value}"
        assert texts(postgres_url) == {"vectors": {swapped}, "langmem": {swapped}}

        # Retracting the replacement puts the old value back, under ids the ledger records.
        undo = await gw.call(
            "memory.retract",
            {"factId": second.data["fact"]["factId"], "reason": "entered on the wrong account"},
        )
        assert not undo.is_error, undo.text
        assert undo.data["restored"]["factId"] == fact["factId"]
        restored = f"acct:42 plan: {old_value}"
        assert texts(postgres_url) == {"vectors": {restored}, "langmem": {restored}}

        # Forget both: no row, item or embedding of either is left in either store.
        for fact_id in (second.data["fact"]["factId"], fact["factId"]):
            gone = await gw.call("memory.forget", {"factId": fact_id, "reason": "gdpr erasure"})
            assert not gone.is_error, gone.text
            assert gone.data["stillHeld"] == []
        assert gone.data["verification"] == {"vectors": "verified", "langmem": "verified"}
        assert "restored" not in gone.data
        read = await gw.call("memory.read", {"subject": "acct:42", "includeClaimed": True})
        assert read.data["facts"] == []
    assert scan(postgres_url) == {"vectors": [], "langmem": [], "langmem_vectors": []}
    ledger_text = ledger.read_text(encoding="utf-8")
    assert old_value not in ledger_text and new_value not in ledger_text

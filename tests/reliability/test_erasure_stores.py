"""Erasure proof (issue 7, item 6) through the server, with every write-through store.

Through ``serve --config`` over stdio (the gateway's wire), facts of many shapes are written,
superseded, forgotten and swept; a few are kept as controls that the same scans must find (see
``test_erasure.py`` for the ledger's own files). Scanned afterwards: the four vendor fakes' whole
stored state (pending work and ghosts included), the pgvector table by SQL and the PostgreSQL
files under it, and LangGraph's SQLite store by SQL and byte for byte (database, ``-wal``,
``-shm``).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from .crash_ops import make_value
from .erasure_support import Facts
from .support import files_under, record, scale, scan

STORE_MODULES = (
    "agent_custody_state_mem0",
    "agent_custody_state_zep",
    "agent_custody_state_letta",
    "agent_custody_state_cognee",
    "agent_custody_state_pgvector",
    "agent_custody_state_langgraph",
)
TABLE = "custody_facts"


@pytest.fixture
def six_stores(tmp_path: Path, postgres_url: str) -> Iterator[dict[str, Any]]:
    for module in STORE_MODULES:
        pytest.importorskip(module, reason=f"the erasure scan through stores needs {module}")
    pytest.importorskip("langgraph.store.sqlite", reason="needs langgraph-checkpoint-sqlite")
    from agent_custody_state_cognee.testing import FakeCognee
    from agent_custody_state_letta.testing import FakeLetta
    from agent_custody_state_mem0.testing import FakeMem0
    from agent_custody_state_zep.testing import FakeZep
    from e2e.endtoend import write_config

    keys = {name: uuid.uuid4().hex for name in ("mem0", "zep", "letta", "cognee")}
    with ExitStack() as stack:
        mem0 = stack.enter_context(FakeMem0(api_key=keys["mem0"]))
        zep = stack.enter_context(FakeZep(api_key=keys["zep"]))
        letta = stack.enter_context(FakeLetta(api_key=keys["letta"]))
        cognee = stack.enter_context(FakeCognee(api_key=keys["cognee"], token=None))
        graph_uuid, agent_id = zep.create_graph("custody"), letta.add_agent()
        langgraph = tmp_path / "langgraph" / "store.sqlite"
        langgraph.parent.mkdir()
        ledger_dir = tmp_path / "ledger"
        ledger_dir.mkdir()
        stores = [
            {
                "name": "mem0",
                "type": "mem0",
                "user_id": "support",
                "host": mem0.url,
                "api_key_env": "ER_MEM0",
                "mem0_dir": str(tmp_path / "mem0"),
            },
            {
                "name": "zep",
                "type": "zep",
                "graph_uuid": graph_uuid,
                "base_url": zep.url,
                "api_key_env": "ER_ZEP",
            },
            {
                "name": "letta",
                "type": "letta",
                "agent_id": agent_id,
                "base_url": letta.url,
                "api_key_env": "ER_LETTA",
            },
            {
                "name": "cognee",
                "type": "cognee",
                "url": cognee.url,
                "dataset_name": "agent-custody",
                "api_key_env": "ER_COGNEE",
            },
            {
                "name": "vectors",
                "type": "pgvector",
                "dsn_env": "ER_PG",
                "table": TABLE,
                "dimensions": 8,
                "embed": "agent_custody_state_conformance.embeddings:embed_8",
            },
            {
                "name": "langmem",
                "type": "langgraph",
                "backend": "sqlite",
                "path": str(langgraph),
                "namespace": ["memories", "{space}"],
            },
        ]
        config = write_config(
            tmp_path,
            ledger=ledger_dir / "ledger.sqlite",
            stores=stores,
            verify={"attempts": 3, "delay_ms": 10},
        )
        env = {
            "ER_MEM0": keys["mem0"],
            "ER_ZEP": keys["zep"],
            "ER_LETTA": keys["letta"],
            "ER_COGNEE": keys["cognee"],
            "ER_PG": postgres_url,
            "MEM0_TELEMETRY": "false",
        }
        yield {
            "fakes": {"mem0": mem0, "zep": zep, "letta": letta, "cognee": cognee},
            "config": config,
            "env": env,
            "pg_url": postgres_url,
            "langgraph": langgraph,
            "ledger_dir": ledger_dir,
        }


@pytest.mark.postgres
def test_stores_hold_no_erased_byte(six_stores: dict[str, Any], embedded_postgres: Any) -> None:
    import anyio

    from agent_custody_state_conformance.gateway import GatewayClient
    from e2e.endtoend import postgres_residue, residue, sqlite_residue

    n = scale(15, 120)
    rng = random.Random(7)
    facts = Facts()

    async def drive() -> None:
        async with GatewayClient.stdio(
            "serve", "--config", str(six_stores["config"]), env=six_stores["env"]
        ) as gw:
            sweep_space = f"team:retention-{uuid.uuid4().hex[:6]}"
            for i in range(n):
                value, hexes = make_value(rng)
                space = sweep_space if i % 3 == 0 else "org"
                out = await gw.call(
                    "memory.write",
                    {"subject": f"acct:{i}", "predicate": "p", "value": value, "space": space},
                )
                assert not out.is_error, out.texts
                fid = out.data["fact"]["factId"]
                facts.erased[fid] = [bytes.fromhex(h) for h in hexes]
                if i % 3 == 1:  # superseded first: the store drops the old value then
                    nxt, more = make_value(rng)
                    out = await gw.call(
                        "memory.write",
                        {
                            "subject": f"acct:{i}",
                            "predicate": "p",
                            "value": nxt,
                            "space": space,
                            "supersedes": fid,
                        },
                    )
                    assert not out.is_error, out.texts
                    newer = out.data["fact"]["factId"]
                    facts.erased[newer] = [bytes.fromhex(h) for h in more]
                    gone = await gw.call("memory.forget", {"factId": newer, "reason": "gdpr"})
                    assert not gone.is_error, gone.texts
                if space == "org":
                    gone = await gw.call("memory.forget", {"factId": fid, "reason": "gdpr"})
                    assert not gone.is_error, gone.texts
            swept = await gw.call(
                "memory.sweep",
                {"reason": "retention", "space": sweep_space, "before": "2999-01-01T00:00:00Z"},
            )
            assert not swept.is_error and not swept.data["stillHeld"], swept.texts
            for i in range(3):
                value, hexes = make_value(random.Random(500 + i))
                out = await gw.call(
                    "memory.write",
                    {"subject": f"keep:{i}", "predicate": "p", "value": value, "space": "org"},
                )
                facts.kept[out.data["fact"]["factId"]] = [bytes.fromhex(h) for h in hexes]

    anyio.run(drive)

    def where(needle: bytes) -> dict[str, list[str]]:
        text = needle.decode("utf-8")
        found: dict[str, list[str]] = {}
        for name, fake in six_stores["fakes"].items():
            paths = [
                p
                for p in residue(fake, text)
                # mem0's add events echo the text and its API cannot delete them (the one
                # trace tests/e2e allows too); counted below, not hidden.
                if not (name == "mem0" and "['events']" in p)
            ]
            if paths:
                found[name] = paths
        if postgres_residue(six_stores["pg_url"], text, [TABLE]):
            found["pgvector (SQL)"] = [TABLE]
        if sqlite_residue(six_stores["langgraph"], text):
            found["langgraph (SQL)"] = ["store"]
        return found

    erased = facts.needles(facts.erased)
    kept = facts.needles(facts.kept)
    logical = {n: w for n in erased if (w := where(n))}
    assert not logical, f"erased values still held by stores: {logical}"
    assert all(where(n) for n in kept), "a store scan cannot see a kept value"

    # Byte level: the ledger's files and LangGraph's SQLite files, as they are.
    file_sets = {
        "ledger": files_under(six_stores["ledger_dir"]),
        "langgraph files": files_under(six_stores["langgraph"].parent),
    }
    for name, files in file_sets.items():
        hits = scan(files, erased)
        assert not hits, f"{name}: erased bytes on disk: {list(hits)[:3]}"
    assert scan(file_sets["langgraph files"], kept), "langgraph files: blind scan"

    # PostgreSQL under pgvector: a plain DELETE leaves dead row versions in the table's pages,
    # which docs/stores.md leaves to the operator's erasure runbook. Measured at each step; only
    # VACUUM FULL rewrites the table without them (a plain VACUUM leaves some: see
    # docs/reliability.md), and after it nothing may remain.
    import psycopg

    def pg_hits() -> int:
        embedded_postgres.checkpoint()
        embedded_postgres.rotate_wal()
        files = [p for p in files_under(embedded_postgres.data_dir) if "pg_wal" not in p.parts]
        assert scan(files, kept), "postgres files: blind scan"
        return len(scan(files, erased))

    residue_steps = {"after DELETE": pg_hits()}
    with psycopg.connect(six_stores["pg_url"], autocommit=True) as conn:
        conn.execute(f"VACUUM {TABLE}")
        residue_steps["after VACUUM"] = pg_hits()
        conn.execute(f"VACUUM FULL {TABLE}")
        residue_steps["after VACUUM FULL"] = pg_hits()
    assert residue_steps["after VACUUM FULL"] == 0, residue_steps
    echoes = sum(
        1
        for n in erased
        for p in residue(six_stores["fakes"]["mem0"], n.decode())
        if "['events']" in p
    )
    record(
        "erasure[six stores]",
        facts_erased=len(facts.erased),
        needles=len(erased),
        stores=6,
        fake_state_scans=len(erased) * 4,
        sql_scans=len(erased) * 2,
        files_scanned=sum(len(f) for f in file_sets.values()),
        bytes_found_ledger=0,
        bytes_found_langgraph=0,
        pgvector_needles_on_disk=residue_steps,
        mem0_event_echoes_allowed=echoes,
    )

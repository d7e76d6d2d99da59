"""Erasure proof (issue 7, item 6): after forget and sweep, no byte of the value, anywhere.

Values of many shapes (strings, 15-digit numbers, nested JSON, unicode, lists), each carrying a
fresh random marker so that neither compression nor a short value can fool the scan. Some facts
are forgotten one by one (after supersessions, retractions, confirmations, holds released),
others are swept by space; a few are kept as **controls**: their bytes must be found by the very
same scans, which proves each scan can see what it looks for.

* **Ledger files**, byte for byte: the JSONL file (and every sidecar in its folder); the SQLite
  database, ``-wal`` and ``-shm``, while the ledger is still open and after it is closed; the
  PostgreSQL data directory outside ``pg_wal`` after a checkpoint and a WAL rotation.
* **Write-through stores**, through the server (``serve --config`` over stdio, the gateway's
  wire): the four vendor fakes' whole stored state (pending work and ghosts included), the
  pgvector table by SQL and the PostgreSQL files under it, and LangGraph's SQLite store by SQL
  and byte for byte (database, ``-wal``, ``-shm``).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger

from .crash_worker import make_value
from .support import files_under, record, scale, scan


class Facts:
    """Markers of forgotten and of kept (control) facts, as bytes."""

    def __init__(self) -> None:
        self.erased: dict[str, list[bytes]] = {}
        self.kept: dict[str, list[bytes]] = {}

    def needles(self, which: dict[str, list[bytes]]) -> list[bytes]:
        return [n for ns in which.values() for n in ns]


def fill(ledger: Ledger, rng: random.Random, n: int, facts: Facts) -> str:
    """Write ``n`` facts in every state; forget half one by one; return the space to sweep."""
    sweep_space = f"retention-{uuid.uuid4().hex[:8]}"
    to_forget: list[str] = []
    for i in range(n):
        value, hexes = make_value(rng)
        needles = [bytes.fromhex(h) for h in hexes]
        kind = i % 5
        space = sweep_space if i % 2 else "org"
        event = ledger.assert_fact(
            subject=f"subj-{i}",
            predicate="p",
            value=value,
            space=space,
            actor="a",
            provenance="claimed",
        )
        fid = event.fact_id
        if kind == 1:  # superseded: the old value must go too when it is forgotten
            nxt, more = make_value(rng)
            newer = ledger.assert_fact(
                subject=f"subj-{i}",
                predicate="p",
                value=nxt,
                space=space,
                actor="a",
                supersedes=fid,
            )
            facts.erased[newer.fact_id] = [bytes.fromhex(h) for h in more]
            if space == "org":
                to_forget.append(newer.fact_id)
        elif kind == 2:
            ledger.retract(fact_id=fid, actor="a", reason="wrong")
        elif kind == 3:
            ledger.confirm(fact_id=fid, actor="a")
        elif kind == 4:
            ledger.hold(fact_id=fid, actor="a", reason="case")
            ledger.release(fact_id=fid, actor="a", reason="closed")
        facts.erased[fid] = needles
        if space == "org":
            to_forget.append(fid)
    for fid in to_forget:
        ledger.forget(fact_id=fid, actor="dpo", reason="erasure", keep_digest=rng.random() < 0.5)
    for i in range(3):  # controls, in both spaces, never forgotten
        value, hexes = make_value(random.Random(1000 + i))
        event = ledger.assert_fact(
            subject=f"keep-{i}", predicate="p", value=value, space="org", actor="a"
        )
        facts.kept[event.fact_id] = [bytes.fromhex(h) for h in hexes]
    return sweep_space


@pytest.mark.parametrize("backend", ["jsonl", "sqlite", "postgres"])
def test_ledger_files_hold_no_erased_byte(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    n = scale(40, 400)
    rng = random.Random(42)
    folder = tmp_path / "ledger"
    pg = None
    if backend == "postgres":
        pytest.importorskip("agent_custody_state_events_postgres", reason="events-postgres")
        pg = request.getfixturevalue("embedded_postgres")
        location = f"{request.getfixturevalue('postgres_url')}&table=erasure"
    else:
        if backend == "sqlite":
            pytest.importorskip("agent_custody_state_events_sqlite", reason="events-sqlite")
        folder.mkdir()  # backends never create a folder
        location = str(folder / f"ledger.{backend}")
    facts = Facts()
    scans = 0
    with Ledger(location) as ledger:
        space = fill(ledger, rng, n, facts)
        result = ledger.sweep(
            before=datetime.now(UTC) + timedelta(seconds=5),
            space=space,
            actor="dpo",
            reason="retention",
        )
        assert result.forgotten and not result.held
        for fid in facts.erased:
            got = ledger.get(fid)
            assert got is not None and got.value is None and got.forgotten is not None, fid
        if backend != "postgres":
            # While open: the WAL and -shm are live files here.
            hits = scan(files_under(folder), facts.needles(facts.erased))
            assert not hits, f"erased bytes in the open ledger's files: {hits}"
            assert len(scan(files_under(folder), facts.needles(facts.kept))) == len(
                facts.needles(facts.kept)
            ), "the scan cannot see a kept value"
            scans += 2
    if pg is None:
        files = files_under(folder)
        owned = sorted(p.name for p in files)
    else:
        pg.checkpoint()
        pg.rotate_wal()
        files = [p for p in files_under(pg.data_dir) if "pg_wal" not in p.parts]
        owned = [f"{len(files)} files in the data directory (pg_wal excluded)"]
    hits = scan(files, facts.needles(facts.erased))
    assert not hits, f"erased bytes on disk: {hits}"
    kept = scan(files, facts.needles(facts.kept))
    assert len(kept) == len(facts.needles(facts.kept)), "the scan cannot see a kept value"
    scans += 2
    record(
        f"erasure[ledger {backend}]",
        facts_erased=len(facts.erased),
        needles=len(facts.needles(facts.erased)),
        files_scanned=len(files),
        scans=scans,
        control_needles_found=len(kept),
        bytes_found=0,
        owned=owned[:6],
    )


# -- through the server, with every write-through store -----------------------------------------

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

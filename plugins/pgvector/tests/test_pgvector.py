"""pgvector specifics: settings, the table and index it creates, dimensions, configuration."""

from __future__ import annotations

from typing import Any

import anyio
import psycopg
import pytest
from pydantic import ValidationError

from agent_custody_state.stores import StoreError
from agent_custody_state_conformance.embeddings import embed_8, sha256_embedding
from agent_custody_state_conformance.stores import make_fact
from agent_custody_state_pgvector.settings import PgvectorSettings
from agent_custody_state_pgvector.store import PgvectorStore, build

EMBED = "agent_custody_state_conformance.embeddings:embed_8"


def settings(**changes: Any) -> PgvectorSettings:
    data: dict[str, Any] = {"dsn_env": "PGV_URL", "dimensions": 8, "embed": EMBED}
    data.update(changes)
    return PgvectorSettings.model_validate(data)


@pytest.mark.parametrize("table", ["facts", "memory.facts", "_f1"])
def test_table_names_accepted(table: str) -> None:
    assert settings(table=table).table == table


@pytest.mark.parametrize("table", ["Facts", "facts; drop table x", "a.b.c", "1facts", ""])
def test_table_names_refused(table: str) -> None:
    with pytest.raises(ValidationError, match="table name must be a plain identifier"):
        settings(table=table)


def test_secrets_stay_out_of_the_file() -> None:
    with pytest.raises(ValidationError, match="dsn holds a password"):
        settings(dsn_env=None, dsn="postgresql://u:secret@db/x")
    with pytest.raises(ValidationError, match="exactly one of dsn_env"):
        settings(dsn_env=None)
    with pytest.raises(ValidationError, match="exactly one of dsn_env"):
        settings(dsn="postgresql:///x?host=/run/pg")
    assert settings(dsn_env=None, dsn="postgresql:///x?host=/run/pg").dsn is not None


def test_embed_reference_and_unknown_keys() -> None:
    with pytest.raises(ValidationError, match='embed must be "module:function"'):
        settings(embed="not a reference")
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        settings(dimension=8)


def test_embedder_dimensions_checked_at_build(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGV_URL", "postgresql:///nowhere")
    with pytest.raises(StoreError, match="returned 8 floats but dimensions = 16"):
        build(settings(dimensions=16), name="vectors")
    with pytest.raises(StoreError, match="cannot be imported"):
        build(settings(embed="no_such_module:embed"), name="vectors")
    monkeypatch.delenv("PGV_URL")
    with pytest.raises(StoreError, match="environment variable PGV_URL is not set"):
        build(settings(), name="vectors")


@pytest.mark.postgres
def test_creates_table_and_hnsw_index(postgres_url: str) -> None:
    store = PgvectorStore("vectors", postgres_url, embed_8, dimensions=8, table="facts")
    fact = make_fact(value={"tier": "pro"})
    try:
        assert anyio.run(store.put, fact) == fact.fact_id
    finally:
        store.close()
    with psycopg.connect(postgres_url) as conn:
        columns = conn.execute(
            "SELECT column_name, format_type(atttypid, atttypmod) FROM information_schema.columns"
            " c JOIN pg_attribute a ON a.attrelid = 'facts'::regclass AND a.attname = c.column_name"
            " WHERE c.table_name = 'facts' ORDER BY c.ordinal_position"
        ).fetchall()
        index = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = 'facts' AND indexdef LIKE '%hnsw%'"
        ).fetchone()
        row = conn.execute("SELECT id, text, metadata FROM facts").fetchone()
    assert columns == [
        ("id", "text"),
        ("text", "text"),
        ("embedding", "vector(8)"),
        ("metadata", "jsonb"),
        ("created_at", "timestamp with time zone"),
    ]
    assert index is not None and "vector_cosine_ops" in index[0]
    assert row == (fact.fact_id, 'acct:42 plan: {"tier":"pro"}', row[2])
    assert row[2]["source"] == "agent-custody"


@pytest.mark.postgres
def test_put_is_an_upsert_by_fact_id(postgres_url: str) -> None:
    store = PgvectorStore("vectors", postgres_url, embed_8, dimensions=8, table="facts")
    fact = make_fact()

    async def twice() -> None:
        await store.put(fact)
        await store.put(fact.with_(value="enterprise"))

    try:
        anyio.run(twice)
    finally:
        store.close()
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT text FROM facts").fetchall() == [("acct:42 plan: enterprise",)]


@pytest.mark.postgres
def test_existing_table_with_other_dimensions_is_refused(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE facts (id text PRIMARY KEY, text text, embedding vector(3),"
            " metadata jsonb, created_at timestamptz)"
        )
    store = PgvectorStore("vectors", postgres_url, embed_8, dimensions=8, table="facts")
    with pytest.raises(StoreError, match=r"has embedding vector\(3\) but dimensions = 8"):
        anyio.run(store.put, make_fact())


@pytest.mark.postgres
def test_missing_table_without_create(postgres_url: str) -> None:
    store = PgvectorStore(
        "vectors", postgres_url, embed_8, dimensions=8, table="facts", create=False
    )
    with pytest.raises(StoreError, match="table facts does not exist"):
        anyio.run(store.put, make_fact())


@pytest.mark.postgres
def test_verification_uses_nearest_neighbours(postgres_url: str) -> None:
    """Verification re-embeds the text: among other rows, the nearest neighbours of the fact's
    own text include it while it is held and not once it is deleted."""
    store = PgvectorStore("vectors", postgres_url, embed_8, dimensions=8, table="facts", top_k=3)
    fact = make_fact()
    text = f"{fact.subject} {fact.predicate}: {fact.value}"

    async def scenario() -> tuple[list[str], bool, list[str], bool, bool]:
        await store.put(fact)
        for i in range(20):  # neighbours that are not the fact
            await store.put(make_fact(subject=f"acct:{i}"))
        held = await anyio.to_thread.run_sync(store.nearest, text)
        still = await store.verify_removed(fact.fact_id, fact)
        await store.remove(fact.fact_id, fact)
        after = await anyio.to_thread.run_sync(store.nearest, text)
        gone = await store.verify_removed(fact.fact_id, fact)
        await store.put(fact)
        return held, still, after, gone, await store.verify_removed(fact.fact_id, fact)

    try:
        held, still, after, gone, back = anyio.run(scenario)
    finally:
        store.close()
    assert held[0] == fact.fact_id and len(held) == 3  # distance 0: its own text comes first
    assert fact.fact_id not in after and len(after) == 3
    assert (still, gone, back) == (False, True, False)


@pytest.mark.postgres
def test_built_from_configuration(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGV_URL", postgres_url)
    store = build(settings(table="memory_rows", top_k=5, distance="l2"), name="vectors")
    try:
        assert store.name == "vectors" and store.table == "memory_rows"
        anyio.run(store.put, make_fact())
    finally:
        store.close()
    with psycopg.connect(postgres_url) as conn:
        index = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = 'memory_rows'"
            " AND indexdef LIKE '%hnsw%'"
        ).fetchone()
    assert index is not None and "vector_l2_ops" in index[0]


def test_hash_embedding_is_deterministic_and_unit_length() -> None:
    a, b = sha256_embedding("x", 8), sha256_embedding("x", 8)
    assert a == b and a != sha256_embedding("y", 8)
    assert abs(sum(v * v for v in a) - 1) < 1e-9
    assert len(sha256_embedding("x", 384)) == 384


@pytest.mark.postgres
def test_dropped_connections_are_replaced(postgres_url: str) -> None:
    store = PgvectorStore("vectors", postgres_url, embed_8, dimensions=8, table="facts")
    first, second = make_fact(), make_fact(subject="acct:7")
    try:
        anyio.run(store.put, first)
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            killed = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()
        assert killed is not None and killed[0] >= 1
        assert anyio.run(store.put, second) == second.fact_id  # no failed call in between
        assert anyio.run(store.verify_removed, first.fact_id, first) is False
    finally:
        store.close()

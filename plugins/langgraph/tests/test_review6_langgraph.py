"""Sixth review: a removal must take an item's embeddings with it (SQLite), and its check must
find the item under an earlier namespace setting rather than report it gone."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from agent_custody_state_conformance.stores import make_fact
from agent_custody_state_langgraph.settings import LangGraphSettings
from agent_custody_state_langgraph.store import LangGraphStore, build

MARKER = b"embedding-of-a-forgotten-value-0451"


def test_a_sqlite_removal_takes_the_items_vectors_with_it(tmp_path: Path) -> None:
    """LangGraph keeps an indexed item's embeddings in ``store_vectors`` (its own DDL, tied to
    the item by ``ON DELETE CASCADE``). The vector index needs sqlite-vec loaded, which this
    interpreter cannot, so the table is made with LangGraph's migration and filled by hand."""
    path = tmp_path / "lg.sqlite"
    store = build(LangGraphSettings(backend="sqlite", path=str(path)), name="langmem")
    fact = make_fact()
    try:
        anyio.run(store.put, fact)
        with sqlite3.connect(path) as other:
            other.executescript(SqliteStore.VECTOR_MIGRATIONS[0])
            prefix = ".".join(store.namespace_for(fact))
            other.execute(
                "INSERT INTO store_vectors (prefix, key, field_name, embedding) VALUES (?,?,?,?)",
                (prefix, fact.fact_id, "content", MARKER),
            )
        anyio.run(store.remove, fact.fact_id, fact)
        assert anyio.run(store.verify_removed, fact.fact_id, fact) is True
    finally:
        store.close()
    with sqlite3.connect(path) as other:
        assert other.execute("SELECT count(*) FROM store_vectors").fetchone() == (0,)
    assert MARKER not in b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())


def test_opening_drops_vectors_an_earlier_delete_left(tmp_path: Path) -> None:
    path = tmp_path / "lg.sqlite"
    build(LangGraphSettings(backend="sqlite", path=str(path)), name="langmem").close()
    with sqlite3.connect(path) as other:  # foreign keys off: as LangGraph's own connections
        other.executescript(SqliteStore.VECTOR_MIGRATIONS[0])
        other.execute(
            "INSERT INTO store_vectors (prefix, key, field_name, embedding) VALUES (?,?,?,?)",
            ("memories.team:support", "a-deleted-item", "content", MARKER),
        )
    build(LangGraphSettings(backend="sqlite", path=str(path)), name="langmem").close()
    with sqlite3.connect(path) as other:
        assert other.execute("SELECT count(*) FROM store_vectors").fetchone() == (0,)


def test_a_copy_under_an_earlier_namespace_setting_is_not_reported_gone() -> None:
    base = InMemoryStore()
    before = LangGraphStore("langmem", base)  # ("memories", "{space}")
    after = LangGraphStore("langmem", base, namespace=("agent", "{space}", "facts"))
    fact = make_fact()
    anyio.run(before.put, fact)
    anyio.run(after.remove, fact.fact_id, fact)
    # Before the fix the check looked only where the current setting puts the fact: verified,
    # with the item still held under the old namespace.
    assert anyio.run(after.verify_removed, fact.fact_id, fact) is False
    base.delete(before.namespace_for(fact), fact.fact_id)
    assert anyio.run(after.verify_removed, fact.fact_id, fact) is True

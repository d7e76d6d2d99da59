"""LangGraph specifics: the item LangMem sees, namespaces, settings, backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from langgraph.store.memory import InMemoryStore
from pydantic import ValidationError

from agent_custody_state.stores import StoreError, custody_metadata
from agent_custody_state_conformance.embeddings import embed_texts_8
from agent_custody_state_conformance.stores import make_fact
from agent_custody_state_langgraph.settings import LangGraphSettings
from agent_custody_state_langgraph.store import LangGraphStore, build


def test_item_is_what_langmem_reads() -> None:
    base = InMemoryStore(index={"dims": 8, "embed": embed_texts_8, "fields": ["content"]})  # type: ignore[arg-type]
    store = LangGraphStore("langmem", base, namespace=("memories", "dana"), indexed=True)
    fact = make_fact(value={"tier": "pro"})
    assert anyio.run(store.put, fact) == fact.fact_id
    item = base.get(("memories", "dana"), fact.fact_id)
    assert item is not None
    assert item.value == {
        "content": 'acct:42 plan: {"tier":"pro"}',
        "subject": "acct:42",
        "predicate": "plan",
        "value": {"tier": "pro"},
        **custody_metadata(fact),
    }
    # A LangMem search tool: semantic query over the user's namespace finds it first.
    hits = base.search(("memories", "dana"), query='acct:42 plan: {"tier":"pro"}', limit=3)
    assert hits[0].key == fact.fact_id


def test_default_namespace_is_the_space() -> None:
    base = InMemoryStore()
    store = LangGraphStore("langmem", base)
    fact = make_fact(space="user:dana")
    anyio.run(store.put, fact)
    assert base.get(("memories", "user:dana"), fact.fact_id) is not None
    with pytest.raises(StoreError, match='namespace label "team.support"') as caught:
        anyio.run(store.put, make_fact(space="team.support"))
    assert caught.value.store == "langmem"


def settings(**data: Any) -> LangGraphSettings:
    return LangGraphSettings.model_validate(data)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"backend": "sqlite"}, 'backend "sqlite" needs path'),
        ({"backend": "postgres"}, 'backend "postgres" needs dsn_env'),
        ({"path": "x.db"}, 'path is only for backend "sqlite"'),
        ({"namespace": ["memories", "a.b"]}, 'contain no "."'),
        ({"namespace": []}, "at least one label"),
        ({"namespace": ["langgraph", "x"]}, 'may not be "langgraph"'),
        ({"index_dimensions": 8}, "both index_dimensions and index_embed"),
        ({"index_embed": "nope", "index_dimensions": 8}, '"module:function"'),
        ({"dsn": "postgresql://x"}, "Extra inputs are not permitted"),
    ],
)
def test_settings_refused(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        settings(**data)


def test_sqlite_backend_persists(tmp_path: Path) -> None:
    path = str(tmp_path / "lg.sqlite")
    fact = make_fact()
    first = build(settings(backend="sqlite", path=path), name="langmem")
    try:
        anyio.run(first.put, fact)
    finally:
        first.close()
    second = build(settings(backend="sqlite", path=path), name="langmem")
    try:
        assert anyio.run(second.verify_removed, fact.fact_id, fact) is False
        anyio.run(second.remove, fact.fact_id, fact)
        assert anyio.run(second.verify_removed, fact.fact_id, fact) is True
    finally:
        second.close()


def test_sqlite_backend_leaves_no_bytes_of_a_removed_fact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A removal must erase the item's bytes from the file, whatever secure_delete default the
    SQLite library was built with (Debian's is on; SQLite's own default is off, which
    this test imitates)."""
    import sqlite3

    real_connect = sqlite3.connect

    def default_off(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = real_connect(*args, **kwargs)
        conn.execute("PRAGMA secure_delete=OFF")
        return conn

    monkeypatch.setattr(sqlite3, "connect", default_off)
    path = tmp_path / "lg.sqlite"
    marker = "erase-me-0123456789abcdef"
    keep = make_fact(value="keep-0123456789abcdef")
    gone = make_fact(value=marker)
    store = build(settings(backend="sqlite", path=str(path)), name="langmem")
    try:
        anyio.run(store.put, keep)
        anyio.run(store.put, gone)
        anyio.run(store.remove, gone.fact_id, gone)
    finally:
        store.close()
    data = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert b"keep-0123456789abcdef" in data
    assert marker.encode() not in data


def test_postgres_backend_needs_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_LANGGRAPH_URL", raising=False)
    with pytest.raises(StoreError, match="environment variable NO_SUCH_LANGGRAPH_URL is not set"):
        build(settings(backend="postgres", dsn_env="NO_SUCH_LANGGRAPH_URL"), name="langmem")


def test_unreachable_postgres_names_the_store(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("LG_URL", f"postgresql://nobody@/x?host={tmp_path}&connect_timeout=1")
    with pytest.raises(StoreError, match="cannot open the postgres store") as caught:
        build(settings(backend="postgres", dsn_env="LG_URL"), name="langmem")
    assert caught.value.store == "langmem"


@pytest.mark.postgres
def test_postgres_store_survives_dropped_connections(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    monkeypatch.setenv("LG_URL", postgres_url)
    store = build(settings(backend="postgres", dsn_env="LG_URL"), name="langmem")
    try:
        first, second = make_fact(), make_fact(subject="acct:7")
        anyio.run(store.put, first)
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            killed = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()
        assert killed is not None and killed[0] >= 1
        anyio.run(store.put, second)  # the pool noticed and reconnected
        assert anyio.run(store.verify_removed, second.fact_id, second) is False
    finally:
        store.close()


def test_a_relative_sqlite_path_is_relative_to_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_custody_state.config import load_config
    from agent_custody_state.storebuild import build_stores

    etc = tmp_path / "etc"
    (etc / "data").mkdir(parents=True)
    config = etc / "memory.toml"
    config.write_text(
        '[[stores]]\nname = "langmem"\ntype = "langgraph"\nbackend = "sqlite"\n'
        'path = "data/langmem.sqlite"\n'
    )
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("AGENT_CUSTODY_BLOCK_PLUGINS", raising=False)
    (store,) = build_stores(load_config(config).stores)
    try:
        anyio.run(store.put, make_fact())
    finally:
        store.close()
    assert (etc / "data" / "langmem.sqlite").is_file()
    assert list(elsewhere.iterdir()) == []

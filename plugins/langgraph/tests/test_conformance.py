"""The shared store suite on LangGraph's real stores: InMemoryStore (with a vector index),
SqliteStore and PostgresStore (with a pgvector index, on the embedded server)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import psycopg
import pytest
from langgraph.store.memory import InMemoryStore

from agent_custody_state_conformance.hygiene import PluginHygiene
from agent_custody_state_conformance.stores import StoreConformance
from agent_custody_state_langgraph.settings import LangGraphSettings
from agent_custody_state_langgraph.store import LangGraphStore, build

EMBED = "agent_custody_state_conformance.embeddings:embed_texts_8"
OTHER_NAMESPACE = ("other", "{space}")


def record(namespace: str, key: str, value: dict[str, Any]) -> dict[str, Any]:
    """What a backdoor reports: the item, with its namespace so tests can check it."""
    return {
        "id": key,
        "text": value["content"],
        "value": value["value"],
        "metadata": value,
        "namespace": namespace,
    }


class MemoryBackdoor:
    """Reads InMemoryStore's own dict of namespaces, not through any search."""

    def __init__(self, base: InMemoryStore) -> None:
        self.base = base

    def find(self, fact_id: str) -> dict[str, Any] | None:
        for namespace, items in self.base._data.items():
            for key, item in items.items():
                if item.value.get("factId") == fact_id:
                    return record(".".join(namespace), key, item.value)
        return None


class SqliteBackdoor:
    """Reads LangGraph's ``store`` table with its own sqlite3 connection."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def find(self, fact_id: str) -> dict[str, Any] | None:
        with sqlite3.connect(self.path) as conn:
            row = conn.execute(
                "SELECT prefix, key, value FROM store WHERE json_extract(value, '$.factId') = ?",
                (fact_id,),
            ).fetchone()
        return record(row[0], row[1], json.loads(row[2])) if row else None


class PostgresBackdoor:
    """Reads LangGraph's ``store`` table (and its vectors) with its own connection."""

    def __init__(self, url: str) -> None:
        self.url = url

    def find(self, fact_id: str) -> dict[str, Any] | None:
        with psycopg.connect(self.url) as conn:
            row = conn.execute(
                "SELECT prefix, key, value FROM store WHERE value->>'factId' = %s", (fact_id,)
            ).fetchone()
            if row is None:
                vectors = conn.execute(
                    "SELECT count(*) FROM store_vectors WHERE key = %s", (fact_id,)
                ).fetchone()
                assert vectors == (0,), "an embedding outlived its item"
                return None
        return record(row[0], row[1], row[2])


class BuiltStoreConformance(StoreConformance):
    """Stores built by the plugin's factory from the class's ``settings``; the relocated store
    differs from ``store`` only in its namespace template."""

    @pytest.fixture
    def settings(self) -> LangGraphSettings:
        raise NotImplementedError("provide a `settings` fixture")

    @pytest.fixture
    def store(self, settings: LangGraphSettings) -> Iterator[LangGraphStore]:
        store = build(settings, name="langmem")
        yield store
        store.close()

    @pytest.fixture
    def relocated_store(self, settings: LangGraphSettings) -> Iterator[LangGraphStore]:
        store = build(settings.model_copy(update={"namespace": OTHER_NAMESPACE}), name="langmem")
        yield store
        store.close()


class TestInMemoryStoreConformance(BuiltStoreConformance):
    capabilities = frozenset({"verify", "held", "relocate"})

    @pytest.fixture
    def settings(self) -> LangGraphSettings:
        return LangGraphSettings(index_dimensions=8, index_embed=EMBED)  # an InMemoryStore

    @pytest.fixture
    def backdoor(self, store: LangGraphStore) -> MemoryBackdoor:
        return MemoryBackdoor(store.base)  # type: ignore[arg-type]


class TestSqliteStoreConformance(BuiltStoreConformance):
    capabilities = frozenset({"verify", "held", "fail", "relocate"})

    @pytest.fixture
    def path(self, tmp_path: Path) -> Path:
        return tmp_path / "langgraph.sqlite"

    @pytest.fixture
    def settings(self, path: Path) -> LangGraphSettings:
        return LangGraphSettings(backend="sqlite", path=str(path))

    @pytest.fixture
    def backdoor(self, path: Path, store: LangGraphStore) -> SqliteBackdoor:
        return SqliteBackdoor(path)

    @pytest.fixture
    def failing_store(self, tmp_path: Path) -> LangGraphStore:
        store = build(
            LangGraphSettings(backend="sqlite", path=str(tmp_path / "gone.sqlite")), name="langmem"
        )
        store.close()  # the store's connection is closed: every call raises
        return store


@pytest.mark.postgres
class TestPostgresStoreConformance(BuiltStoreConformance):
    capabilities = frozenset({"verify", "held", "fail", "relocate"})

    @pytest.fixture
    def settings(self, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> LangGraphSettings:
        monkeypatch.setenv("LANGGRAPH_PG_URL", postgres_url)
        return LangGraphSettings(
            backend="postgres", dsn_env="LANGGRAPH_PG_URL", index_dimensions=8, index_embed=EMBED
        )

    @pytest.fixture
    def backdoor(self, postgres_url: str) -> PostgresBackdoor:
        return PostgresBackdoor(postgres_url)

    @pytest.fixture
    def failing_store(self, store: LangGraphStore) -> LangGraphStore:
        store.close()  # the server is fine, the store's connection is gone
        return store


class TestLangGraphHygiene(PluginHygiene):
    entry_point = "langgraph"
    registers = frozenset({"store langgraph"})
    heavy_modules = ("langgraph", "langchain_core", "psycopg")
    # PH-5 builds the store over an InMemoryStore.
    store_settings: ClassVar[dict[str, dict[str, Any]]] = {"langgraph": {"backend": "memory"}}

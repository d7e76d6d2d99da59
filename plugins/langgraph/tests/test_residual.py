"""What a LangGraph store declares may remain after a removal (``leftovers``)."""

from __future__ import annotations

from pathlib import Path

from agent_custody_state_langgraph.settings import LangGraphSettings
from agent_custody_state_langgraph.store import leftovers


def texts(settings: LangGraphSettings) -> str:
    return " | ".join(w["where"] for w in leftovers(settings))


def test_each_backend_names_its_own_leftovers(tmp_path: Path) -> None:
    assert "this process's memory" in texts(LangGraphSettings())
    sqlite = texts(LangGraphSettings(backend="sqlite", path=str(tmp_path / "s.sqlite")))
    assert str(tmp_path / "s.sqlite") in sqlite and "-wal" in sqlite
    postgres = texts(LangGraphSettings(backend="postgres", dsn_env="LG_DSN"))
    assert "store_vectors" in postgres and "WAL" in postgres
    assert "embedding model" not in postgres


def test_an_index_adds_its_embedding_model() -> None:
    embed = "agent_custody_state_conformance.embeddings:embed_texts_8"
    indexed = LangGraphSettings(index_dimensions=8, index_embed=embed)
    assert "embedding model" in texts(indexed)

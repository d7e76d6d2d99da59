"""What a mem0 store declares may remain after a removal (``Mem0Settings.residual``)."""

from __future__ import annotations

from agent_custody_state_mem0.settings import Mem0Settings


def texts(settings: Mem0Settings) -> str:
    return " | ".join(w["where"] for w in settings.residual())


def test_the_platform_names_its_history_and_its_copies() -> None:
    said = texts(Mem0Settings(user_id="u"))
    assert "history" in said and "no documented delete" in said and "mem0 platform" in said


def test_a_local_memory_names_its_vector_store_history_and_embedder() -> None:
    qdrant = Mem0Settings(
        user_id="u",
        mode="local",
        local_config={"vector_store": {"provider": "qdrant"}, "embedder": {"provider": "ollama"}},
    )
    said = texts(qdrant)
    assert "qdrant vector store" in said and "history database" in said and "ollama" in said
    postgres = Mem0Settings(
        user_id="u",
        mode="local",
        local_config={"vector_store": {"provider": "pgvector", "config": {"collection_name": "m"}}},
    )
    said = texts(postgres)
    assert "dead row version" in said and " in m's files" in said and "openai" in said

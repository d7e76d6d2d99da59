"""Deterministic test embeddings: no model, no download, the same vector for the same text.

A real embedding model maps similar texts to nearby vectors; these map each text to a fixed
pseudo-random unit vector derived from its SHA-256, so equal texts are identical (distance 0)
and different texts are almost surely not. That is all a removal check by nearest-neighbour
search needs, and it lets vector stores (pgvector, LangGraph's index) run in tests offline.

Configure them like any embedder: ``embed = "agent_custody_state_conformance.embeddings:embed_8"``
with ``dimensions = 8``.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Sequence

__all__ = ["embed_8", "embed_texts_8", "sha256_embedding"]


def sha256_embedding(text: str, dimensions: int = 8) -> list[float]:
    """A unit vector of ``dimensions`` floats in [-1, 1] drawn from SHA-256 of the text."""
    if dimensions < 1:
        raise ValueError("dimensions must be at least 1")
    values: list[float] = []
    counter = 0
    while len(values) < dimensions:
        digest = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        for (word,) in struct.iter_unpack(">I", digest):
            values.append(word / 0xFFFFFFFF * 2.0 - 1.0)
        counter += 1
    values = values[:dimensions]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]


def embed_8(text: str) -> list[float]:
    """``text -> 8 floats``: the single-text form (pgvector's ``embed`` setting)."""
    return sha256_embedding(text, 8)


def embed_texts_8(texts: Sequence[str]) -> list[list[float]]:
    """``texts -> 8 floats each``: the batch form (LangGraph's ``index={"embed": ...}``)."""
    return [sha256_embedding(t, 8) for t in texts]

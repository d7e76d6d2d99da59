"""Fixtures several of the core's test modules share."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_custody_state import Ledger


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    """A JSONL ledger holding one fact (s p = "v" in space o)."""
    path = tmp_path / "ledger.jsonl"
    with Ledger(path) as opened:
        opened.assert_fact(subject="s", predicate="p", value="v", space="o", actor="a")
    return path

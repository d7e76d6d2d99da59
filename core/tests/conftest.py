"""Fixtures several of the core's test modules share."""

from __future__ import annotations

import logging
from collections.abc import Iterator
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


@pytest.fixture(autouse=True)
def _no_stale_log_handler() -> Iterator[None]:
    """Remove the handler a ``serve`` run installs on the root logger (``cli.logs``): it writes
    to the standard error of the test that ran it, which a later test's capture has closed."""
    yield
    root = logging.getLogger()
    for handler in [h for h in root.handlers if h.get_name() == "agent-custody-memory"]:
        root.removeHandler(handler)

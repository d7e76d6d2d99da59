"""The twentieth review's "a forget never changes a ledger's mode", on SQLite.

The core session runs without the SQLite plugin, so the SQLite cases of
``core/tests/test_review20_left.py`` run here, through the same test bodies (the core module is
imported, not collected: its JSONL cases stay the core session's).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

CORE_TESTS = Path(__file__).resolve().parents[3] / "core" / "tests"
sys.path.insert(0, str(CORE_TESTS))
core = importlib.import_module("test_review20_left")


@pytest.mark.parametrize(
    ("command", "case"),
    [("forget", "unknown"), ("forget", "held"), ("sweep", "held"), ("sweep", "done")],
)
@pytest.mark.parametrize("asked", ["new key store", "existing key store", "mode only"])
def test_a_forget_on_a_plain_sqlite_ledger_never_records_crypto_shred_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, case: str, asked: str
) -> None:
    core.test_a_forget_on_a_plain_ledger_never_records_crypto_shred_mode(
        tmp_path, capsys, "l.sqlite", command, case, asked
    )


@pytest.mark.parametrize("command", ["forget", "sweep"])
def test_a_crypto_shred_forget_on_sqlite_still_destroys_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    core.test_a_crypto_shred_forget_still_destroys_the_key(tmp_path, capsys, "l.sqlite", command)

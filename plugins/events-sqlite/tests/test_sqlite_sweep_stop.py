"""A sweep stopped by a fact it may not forget (a crypto-shred value swept in plain mode) still
compacts what it forgot before out of the SQLite file (``secure_delete``, WAL truncation)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_custody_state import Ledger, LedgerError

SECRET = "zebra-secret-4711"
LATER = "2100-01-01T00:00:00Z"


def _mixed(path: Path) -> str:
    """A plain value, then one written in crypto-shred mode (the same ledger file)."""
    with Ledger(path) as ledger:
        first = ledger.assert_fact(
            subject="a", predicate="p", value=SECRET, space="org", actor="x"
        ).fact.fact_id
    with Ledger(path, forget_mode="crypto-shred") as ledger:
        ledger.assert_fact(subject="b", predicate="p", value=2, space="org", actor="x")
    return first


def _files_hold(folder: Path, data: bytes) -> list[str]:
    return [f.name for f in folder.iterdir() if f.is_file() and data in f.read_bytes()]


def test_a_stopped_sweep_still_compacts_what_it_forgot(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    first = _mixed(path)
    with Ledger(path) as ledger:
        with pytest.raises(LedgerError) as caught:
            ledger.sweep(before=LATER, actor="x", reason="r")
        assert caught.value.code == "crypto_shred"
        assert ledger.get(first).forgotten is not None  # type: ignore[union-attr]
        assert _files_hold(tmp_path, SECRET.encode()) == []

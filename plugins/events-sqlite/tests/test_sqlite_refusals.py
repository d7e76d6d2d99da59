"""Refusals on a SQLite ledger leave its files as they were (the core's JSONL tests say the
same there): a lone surrogate in text, a bad export (not even a file is created), an open
refused part-way; and a crypto-shred ledger keeps its mark when its key store moves away."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.cli import main

FACT = {"subject": "acct:1", "predicate": "plan", "space": "org", "actor": "a"}


def _files(folder: Path) -> dict[str, str]:
    """The ledger's bytes; ``-shm`` (the WAL's shared-memory index, no data) left out."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file() and not p.name.endswith("-shm")
    }


def test_text_with_a_lone_surrogate_is_a_ledger_error_and_changes_nothing(
    tmp_path: Path,
) -> None:
    with Ledger(tmp_path / "l.sqlite") as ledger:
        ledger.assert_fact(**FACT, value=1)
        before = _files(tmp_path)
        with pytest.raises(
            LedgerError, match=r"^item 1: subject has a lone surrogate \('\\ud800'\)"
        ):
            ledger.assert_many([{**FACT, "value": 2}, {**FACT, "subject": "x\ud800", "value": 3}])
        assert _files(tmp_path) == before and ledger.count() == 1


def test_a_bad_export_creates_no_ledger(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Ledger(tmp_path / "src.sqlite") as source:
        source.assert_fact(**FACT, value=1)
        events = list(source.backend.iter_events())
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(e.to_json() + "\n" for e in [*events, *events]), "utf-8")
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["import", "--ledger", str(tmp_path / "to.sqlite"), "--from", str(bad)]) == 1
    assert "event 2: eventId" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    with Ledger(tmp_path / "to.sqlite") as target, pytest.raises(LedgerError) as refused:
        target.import_events(events + events)
    assert refused.value.code == "bad_export"


def test_an_open_refused_part_way_leaves_no_file(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="does not exist"):
        Ledger(tmp_path / "new.sqlite", forget_mode="crypto-shred", key_store=str(tmp_path / "n/k"))
    assert list(tmp_path.iterdir()) == []


def test_a_default_key_store_moved_away_leaves_the_mark(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    with Ledger(path, forget_mode="crypto-shred") as sealed:
        sealed.assert_fact(**FACT, value="secret")
    moved = tmp_path / "vault.keys"
    (tmp_path / "l.sqlite.keys").rename(moved)
    with Ledger(path) as plain, pytest.raises(LedgerError, match="crypto-shred mode"):
        plain.assert_fact(**FACT, value="would be plaintext")
    with Ledger(path, forget_mode="crypto-shred", key_store=str(moved)) as again:
        assert again.as_of(subject="acct:1")[0].value == "secret"


def test_of_two_racing_imports_one_is_refused(tmp_path: Path) -> None:
    """Two imports into one new ledger, from two connections: the emptiness checked before the
    first batch is checked again under the write lock, so the one that lost the race is
    refused (``not_empty``) instead of appending a second history after the first."""
    exports = []
    for name in ("one", "two"):
        with Ledger(tmp_path / f"{name}.jsonl") as ledger:
            for i in range(3):
                ledger.assert_fact(subject=f"s{i}", predicate="p", value=i, space="o", actor="a")
            exports.append(list(ledger.export()))
    path = tmp_path / "l.sqlite"
    with Ledger(path) as late, Ledger(path) as early:
        real = late.backend.count
        stale = [0]  # the late import's first check ran before the early one committed
        late.backend.count = lambda: stale.pop() if stale else real()  # type: ignore[method-assign]
        assert early.import_events(exports[0]) == 3
        with pytest.raises(LedgerError, match="import needs an empty ledger") as refused:
            late.import_events(exports[1])
        assert refused.value.code == "not_empty"
        assert late.count() == 3

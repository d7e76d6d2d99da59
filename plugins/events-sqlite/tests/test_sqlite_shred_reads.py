"""A command that only reads never changes a SQLite ledger's forget mode (the core's
``test_cli_shred_reads.py`` says the same of JSONL): asked for crypto-shred on a plain ledger it
refuses in one line, and creates no key store and no ``events_settings`` table; on a
crypto-shred ledger it changes no byte. Writers still create the key store and the mark."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main

FACT = {"subject": "s", "predicate": "p", "space": "o", "actor": "a"}
SECRET = "s3cret-value"

READS = [
    ["export", "--out", "OUT"],
    ["facts"],
    ["history", "FACT"],
    ["timeline", "s"],
    ["show", "FACT"],
    ["verify"],
    ["repair"],
]


def _files(folder: Path) -> dict[str, str]:
    """The ledger's bytes; ``-shm`` (the WAL's shared-memory index, no data) left out."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file() and not p.name.endswith("-shm")
    }


def _tables(path: Path) -> list[str]:
    # immutable: a plain ``mode=ro`` connection leaves a -wal behind, which the read-only
    # commands (which no longer remove it as a writer's last close did) would then find.
    db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return [r[0] for r in db.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")]
    finally:
        db.close()


def _argv(command: list[str], ledger: Path, fact: str, out: Path) -> list[str]:
    words = {"FACT": fact, "OUT": str(out)}
    return [*(words.get(w, w) for w in command), "--ledger", str(ledger)]


@pytest.mark.parametrize("command", READS, ids=lambda c: c[0])
def test_a_read_asked_for_crypto_shred_refuses_a_plain_ledger_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    (tmp_path / "l").mkdir()
    ledger = tmp_path / "l" / "plain.sqlite"
    with Ledger(ledger) as book:
        fact = book.assert_fact(**FACT, value="plain value").fact_id
    before = _files(ledger.parent)
    argv = _argv(command, ledger, fact, tmp_path / "out.jsonl")
    assert main([*argv, "--forget-mode", "crypto-shred"]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"error: {ledger} records plain mode (no crypto-shred mark, no key store); this command "
        "does not change a ledger's mode or create a key store: run it without --forget-mode "
        "crypto-shred\n"
    ), err
    assert _files(ledger.parent) == before and not (tmp_path / "out.jsonl").exists()
    assert "events_settings" not in _tables(ledger)
    typo = tmp_path / "l" / "typo.keys"
    assert main([*argv, "--key-store", str(typo)]) == 1
    assert capsys.readouterr().err == f"error: --key-store {typo}: no such key store\n"
    assert _files(ledger.parent) == before
    with Ledger(ledger) as plain:  # still plain: plaintext writes go on
        plain.assert_fact(**FACT, value="written in plain mode")


@pytest.mark.parametrize(
    "asked", [[], ["--forget-mode", "crypto-shred"]], ids=["recorded", "named"]
)
@pytest.mark.parametrize("command", READS, ids=lambda c: c[0])
def test_reading_a_crypto_shred_ledger_changes_no_byte(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str], asked: list[str]
) -> None:
    (tmp_path / "l").mkdir()
    ledger = tmp_path / "l" / "c.sqlite"
    with Ledger(ledger, forget_mode="crypto-shred") as book:
        fact = book.assert_fact(**FACT, value=SECRET).fact_id
    before = _files(ledger.parent)
    out = tmp_path / "out.jsonl"
    assert main([*_argv(command, ledger, fact, out), *asked]) == 0
    shown = out.read_text("utf-8") if out.exists() else capsys.readouterr().out
    if command[0] not in ("timeline", "verify", "repair"):
        assert SECRET in shown and "A256GCM" not in shown, shown
    assert _files(ledger.parent) == before  # key store and settings table included


def test_reading_a_ledger_from_before_the_mark_does_not_write_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file from before the mark (keys beside it, no settings table) reads in crypto-shred
    mode and stays unmarked: only a writer records the mode."""
    ledger = tmp_path / "old.sqlite"
    with Ledger(ledger, forget_mode="crypto-shred") as book:
        fact = book.assert_fact(**FACT, value=SECRET).fact_id
    db = sqlite3.connect(ledger)
    db.execute("DROP TABLE events_settings")
    db.commit()
    db.close()
    before = _files(tmp_path)
    for command in READS:
        for asked in ([], ["--forget-mode", "crypto-shred"]):
            out = tmp_path / "out.jsonl"
            assert main([*_argv(command, ledger, fact, out), *asked]) == 0, command
            out.unlink(missing_ok=True)
            capsys.readouterr()
            assert _files(tmp_path) == before, command
    assert "events_settings" not in _tables(ledger)


def test_writers_still_create_the_key_store_and_the_mark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    export = tmp_path / "export.jsonl"
    with Ledger(tmp_path / "src.sqlite") as source:
        source.assert_fact(**FACT, value=SECRET)
        export.write_text("".join(e.to_json() + "\n" for e in source.export()), "utf-8")
    target = tmp_path / "new.sqlite"
    argv = ["import", "--ledger", str(target), "--from", str(export)]
    assert main([*argv, "--forget-mode", "crypto-shred"]) == 0
    capsys.readouterr()
    assert Path(f"{target}.keys").is_file() and "events_settings" in _tables(target)
    with Ledger(target) as plain:
        mark = plain.backend.recorded_forget_mode()
        assert mark is not None and mark.mode == "crypto-shred"

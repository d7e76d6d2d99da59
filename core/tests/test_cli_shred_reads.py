"""A command that only reads never changes a ledger's forget mode (JSONL; SQLite: the plugin's
``test_sqlite_shred_reads.py``): asked for crypto-shred on a plain ledger it refuses in one line
and creates no key store and no mark; on a crypto-shred ledger it changes no byte, the key
store's included. Only writers (``import`` into a new ledger, ``serve``, the Python ``Ledger``)
create a key store and record the mode (docs/decisions.md, "Reads never change a ledger's mode").
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main

FACT = {"subject": "s", "predicate": "p", "space": "o", "actor": "a"}
SECRET = "s3cret-value"

#: Every command that only reads, with its arguments (FACT: the fact's id; OUT: an output file).
READS = [
    ["export", "--out", "OUT"],
    ["facts"],
    ["history", "FACT"],
    ["timeline", "s"],
    ["show", "FACT"],
    ["verify"],
]

PLAIN_REFUSAL = (
    "error: {ledger} records plain mode (no crypto-shred mark, no key store); this command does "
    "not change a ledger's mode or create a key store: run it without --forget-mode crypto-shred\n"
)


def _files(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file()
    }


def _argv(command: list[str], ledger: Path, fact: str, out: Path) -> list[str]:
    words = {"FACT": fact, "OUT": str(out)}
    return [*(words.get(w, w) for w in command), "--ledger", str(ledger)]


def _plain(folder: Path) -> tuple[Path, str]:
    path = folder / "plain.jsonl"
    with Ledger(path) as ledger:
        fact = ledger.assert_fact(**FACT, value="plain value")
    return path, fact.fact_id


@pytest.mark.parametrize("command", READS, ids=lambda c: c[0])
def test_a_read_asked_for_crypto_shred_refuses_a_plain_ledger_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    (tmp_path / "l").mkdir()
    ledger, fact = _plain(tmp_path / "l")
    before = _files(ledger.parent)
    argv = _argv(command, ledger, fact, tmp_path / "out.jsonl")
    assert main([*argv, "--forget-mode", "crypto-shred"]) == 1
    err = capsys.readouterr().err
    assert err == PLAIN_REFUSAL.format(ledger=ledger), err
    assert _files(ledger.parent) == before  # no .keys, no .mode, the ledger byte-identical
    assert not (tmp_path / "out.jsonl").exists()
    with Ledger(ledger) as plain:  # still plain: plaintext writes go on
        plain.assert_fact(**FACT, value="written in plain mode")
    assert main(argv) == 0


@pytest.mark.parametrize("command", READS, ids=lambda c: c[0])
def test_a_key_store_named_for_a_read_is_never_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    (tmp_path / "l").mkdir()
    ledger, fact = _plain(tmp_path / "l")
    typo = tmp_path / "l" / "typo.keys"
    before = _files(ledger.parent)
    argv = _argv(command, ledger, fact, tmp_path / "out.jsonl")
    assert main([*argv, "--key-store", str(typo)]) == 1
    err = capsys.readouterr().err
    assert err == f"error: --key-store {typo}: no such key store\n", err
    assert _files(ledger.parent) == before


@pytest.fixture
def sealed(tmp_path: Path) -> tuple[Path, str]:
    """A JSONL ledger in crypto-shred mode with its keys beside it and its mark, and its fact."""
    (tmp_path / "l").mkdir()
    path = tmp_path / "l" / "c.jsonl"
    with Ledger(path, forget_mode="crypto-shred") as ledger:
        fact = ledger.assert_fact(**FACT, value=SECRET)
    return path, fact.fact_id


@pytest.mark.parametrize(
    "asked", [[], ["--forget-mode", "crypto-shred"]], ids=["recorded", "named"]
)
@pytest.mark.parametrize("command", READS, ids=lambda c: c[0])
def test_reading_a_crypto_shred_ledger_changes_no_byte(
    sealed: tuple[Path, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    asked: list[str],
) -> None:
    ledger, fact = sealed
    before = _files(ledger.parent)
    out = tmp_path / "out.jsonl"
    assert main([*_argv(command, ledger, fact, out), *asked]) == 0
    shown = out.read_text("utf-8") if out.exists() else capsys.readouterr().out
    if command[0] not in ("timeline", "verify"):
        assert SECRET in shown and "A256GCM" not in shown, shown
    assert _files(ledger.parent) == before  # key store included


@pytest.mark.parametrize("command", READS, ids=lambda c: c[0])
def test_reading_a_ledger_from_before_the_mark_does_not_write_it(
    sealed: tuple[Path, str], tmp_path: Path, command: list[str]
) -> None:
    """A ledger written before the mark existed (keys beside it, no ``.mode``) reads in
    crypto-shred mode, and the read leaves it unmarked: only a writer records the mode."""
    ledger, fact = sealed
    Path(f"{ledger}.mode").unlink()
    before = _files(ledger.parent)
    for asked in ([], ["--forget-mode", "crypto-shred"]):
        assert main([*_argv(command, ledger, fact, tmp_path / "o.jsonl"), *asked]) == 0
        Path(tmp_path / "o.jsonl").unlink(missing_ok=True)
        assert _files(ledger.parent) == before


def test_a_read_asked_for_crypto_shred_uses_the_recorded_key_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--forget-mode crypto-shred`` alone means the key store the ledger records, not a new
    empty one beside it (which read every value as forgotten)."""
    ledger, vault = tmp_path / "l.jsonl", tmp_path / "vault.keys"
    with Ledger(ledger, forget_mode="crypto-shred", key_store=str(vault)) as book:
        book.assert_fact(**FACT, value=SECRET)
    before = _files(tmp_path)
    assert main(["facts", "--json", "--ledger", str(ledger), "--forget-mode", "crypto-shred"]) == 0
    assert SECRET in capsys.readouterr().out
    assert _files(tmp_path) == before and not (tmp_path / "l.jsonl.keys").exists()


def test_writers_still_create_the_key_store_and_the_mark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, _fact = _plain(tmp_path)
    export = tmp_path / "export.jsonl"
    assert main(["export", "--ledger", str(source), "--out", str(export)]) == 0
    target = tmp_path / "new.jsonl"
    argv = ["import", "--ledger", str(target), "--from", str(export)]
    assert main([*argv, "--forget-mode", "crypto-shred"]) == 0
    assert Path(f"{target}.keys").is_file() and Path(f"{target}.mode").is_file()
    with Ledger(tmp_path / "api.jsonl", forget_mode="crypto-shred") as ledger:
        ledger.assert_fact(**FACT, value=SECRET)
    assert (tmp_path / "api.jsonl.keys").is_file() and (tmp_path / "api.jsonl.mode").is_file()
    capsys.readouterr()


def test_a_writer_asked_for_crypto_shred_uses_the_recorded_key_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``sweep --forget-mode crypto-shred`` (a writer) on a ledger whose key store is recorded
    elsewhere destroys the fact's key there: it creates no empty key store beside the ledger,
    which would have left the key, and so the value, readable."""
    keys = tmp_path / "vault" / "ledger.keys"
    keys.parent.mkdir()
    path = tmp_path / "ledger.jsonl"
    with Ledger(path, forget_mode="crypto-shred", key_store=str(keys)) as ledger:
        ledger.assert_fact(**FACT, value=SECRET)
    before = keys.read_bytes()
    argv = ["sweep", "--ledger", str(path), "--before", "2999-01-01T00:00:00Z", "--reason", "r"]
    assert main([*argv, "--forget-mode", "crypto-shred"]) == 0, capsys.readouterr().err
    assert not (tmp_path / "ledger.jsonl.keys").exists()
    assert keys.read_bytes() != before  # the key destroyed where it is kept
    with Ledger(path, forget_mode="crypto-shred", key_store=str(keys)) as ledger:
        assert [f.value for f in ledger.facts()] == [None]

"""The command line on a crypto-shred ledger: every command that opens one reads it in the mode
recorded with it (``modemark``), with the key store it records, unless told otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main

SECRET = "s3cret-value"


@pytest.fixture
def sealed(tmp_path: Path) -> tuple[Path, Path, str]:
    """A JSONL ledger written in crypto-shred mode with its keys away from it (a ``.mode``
    mark records where), and the id of its one fact."""
    ledger, keys = tmp_path / "l.jsonl", tmp_path / "vault.keys"
    with Ledger(ledger, forget_mode="crypto-shred", key_store=str(keys)) as book:
        fact = book.assert_fact(subject="s", predicate="p", value=SECRET, space="o", actor="a")
    return ledger, keys, fact.fact_id


def _out(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return captured.out


@pytest.mark.parametrize(
    "command",
    [
        ["facts", "--json"],
        ["show", "FACT", "--json"],
        ["history", "FACT", "--json"],
        ["timeline", "s", "--json"],
        ["facts"],
        ["show", "FACT"],
    ],
)
def test_read_commands_print_values_not_envelopes(
    sealed: tuple[Path, Path, str], capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    ledger, _keys, fact = sealed
    argv = [fact if word == "FACT" else word for word in command]
    assert main([*argv, "--ledger", str(ledger)]) == 0
    out = _out(capsys)
    assert SECRET in out and '"shred"' not in out and "A256GCM" not in out, out
    # --forget-mode plain reads the events as stored: the envelopes.
    assert main([*argv, "--ledger", str(ledger), "--forget-mode", "plain"]) == 0
    plain = _out(capsys)
    assert SECRET not in plain and "A256GCM" in plain


def test_export_decrypts_and_import_refuses_envelopes_into_a_plain_ledger(
    sealed: tuple[Path, Path, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    ledger, _keys, _fact = sealed
    out, envelopes = tmp_path / "out.jsonl", tmp_path / "envelopes.jsonl"
    assert main(["export", "--ledger", str(ledger), "--out", str(out)]) == 0
    assert SECRET in out.read_text("utf-8") and "A256GCM" not in out.read_text("utf-8")
    argv = ["export", "--ledger", str(ledger), "--out", str(envelopes), "--forget-mode", "plain"]
    assert main(argv) == 0
    capsys.readouterr()
    target = tmp_path / "plain.jsonl"
    assert main(["import", "--ledger", str(target), "--from", str(envelopes)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "holds a crypto-shred envelope" in err
    assert len(err.splitlines()) == 1 and not list(tmp_path.glob("plain.jsonl*"))
    assert main(["import", "--ledger", str(target), "--from", str(out)]) == 0
    with Ledger(target) as copy:
        assert copy.facts()[0].value == SECRET


def test_verify_checks_sealed_values_with_the_recorded_key_store(
    sealed: tuple[Path, Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    ledger, _keys, _fact = sealed
    assert main(["verify", "--ledger", str(ledger)]) == 0
    assert "sealed" not in capsys.readouterr().err  # the commitments were checked
    event = json.loads(ledger.read_text("utf-8"))
    ct = event["fact"]["value"]["ct"]
    event["fact"]["value"]["ct"] = ("A" if ct[0] != "A" else "B") + ct[1:]
    ledger.write_text(json.dumps(event, separators=(",", ":")) + "\n", "utf-8")
    assert main(["verify", "--ledger", str(ledger)]) == 1
    assert "the sealed value does not open with its key" in capsys.readouterr().out
    # Told plain: the leaves and links only, and a note that the values were not checked.
    assert main(["verify", "--ledger", str(ledger), "--forget-mode", "plain"]) == 0
    assert "commitments were not checked" in capsys.readouterr().err


def test_a_recorded_key_store_that_is_gone_is_one_error_line(
    sealed: tuple[Path, Path, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    ledger, keys, fact = sealed
    moved = tmp_path / "moved.keys"
    keys.rename(moved)
    for argv in (["facts"], ["show", fact], ["verify"], ["export", "--out", "-"]):
        assert main([*argv, "--ledger", str(ledger)]) == 1
        err = capsys.readouterr().err
        assert err == (
            f"error: {ledger} is written in crypto-shred mode and its key store {keys} is not "
            "there; pass --key-store LOCATION (or --forget-mode plain to read the sealed values "
            "as stored)\n"
        ), err
    assert not keys.exists()  # no empty key store created in its place
    assert main(["facts", "--json", "--ledger", str(ledger), "--key-store", str(moved)]) == 0
    assert SECRET in _out(capsys)


def test_forget_names_both_spellings_of_the_mode_it_needs(
    sealed: tuple[Path, Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    ledger, _keys, fact = sealed
    argv = ["forget", "--ledger", str(ledger), "--fact", fact, "--reason", "r"]
    assert main([*argv, "--forget-mode", "plain"]) == 1
    err = capsys.readouterr().err
    assert 'forget_mode="crypto-shred", on the command line --forget-mode crypto-shred' in err
    assert len(err.splitlines()) == 1
    # Without a mode named, the ledger's own is used: the forget goes through.
    assert main(argv) == 0
    with Ledger(ledger, forget_mode="crypto-shred", key_store=str(sealed[1])) as book:
        assert book.get(fact).forgotten is not None  # type: ignore[union-attr]

"""One clear line for each mistake a user makes on the command line, and nothing created by it:
an unparseable URL, a missing folder, an empty export, a file that is not UTF-8, an empty
location, a public key for a private one, an unknown fact, unset variables; and ``--json`` that
is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import build_parser, main


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    return err.strip()


def test_an_unparseable_sql_url_is_one_line_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("agent_custody_state_events_postgres")
    assert main(["facts", "--ledger", "postgresql://"]) == 1
    assert _error(capsys).startswith("error: postgresql://: not a PostgreSQL URL (")
    assert main(["facts", "--ledger", "postgresql://u:hunter2@h:port/db"]) == 1
    err = _error(capsys)
    assert "postgresql://u:***@h:port/db" in err and "hunter2" not in err


def test_keygen_never_creates_a_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["keygen", "--out", "nodir/k"]) == 1
    assert _error(capsys) == (
        "error: --out nodir/k: the folder nodir does not exist; create it first (no command "
        "creates a missing folder)"
    )
    assert list(tmp_path.iterdir()) == []


def test_importing_an_empty_export_says_so_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty, target = tmp_path / "empty.jsonl", tmp_path / "new.jsonl"
    empty.write_text("\n")
    assert main(["import", "--ledger", str(target), "--from", str(empty)]) == 0
    assert capsys.readouterr().err == (
        f"nothing to import: {empty} has no events; {target} not created\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.jsonl"]


def test_a_config_file_that_is_not_utf8_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfeledger")
    for command in (["serve"], ["sweep", "--reason", "r"]):  # every command reading one
        assert main([*command, "--config", str(binary)]) == 1
        assert _error(capsys) == (
            f"error: config file {binary}: not UTF-8 text (byte 0 is b'\\xff'); save the file "
            "as UTF-8"
        ), command


@pytest.mark.parametrize("command", [["serve"], ["facts"], ["export", "--out", "-"]])
def test_an_empty_ledger_location_is_said_to_be_empty(
    capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    assert main([*command, "--ledger", ""]) == 1
    err = _error(capsys)
    assert "is empty; name the ledger" in err and "folder" not in err


def test_serve_help_says_the_environment_overrides_the_file() -> None:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    description = " ".join(sub.choices["serve"].description.split())  # type: ignore[attr-defined]
    assert "Flags override AGENT_CUSTODY_* variables, which override the config file" in (
        description
    )


def test_a_public_key_given_for_the_private_one_is_named(
    tmp_path: Path, ledger: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = tmp_path / "memory.key"
    assert main(["keygen", "--out", str(key)]) == 0
    capsys.readouterr()
    before = ledger.read_bytes()
    with Ledger(ledger) as book:
        fact = book.facts()[0].fact_id
    argv = ["forget", "--ledger", str(ledger), "--fact", fact, "--reason", "r"]
    certificate = tmp_path / "c.json"
    assert main([*argv, "--key", f"{key}.pub", "--certificate", str(certificate)]) == 1
    assert _error(capsys) == f"error: {key}.pub is a public key; pass the private key ({key})"
    assert ledger.read_bytes() == before and not certificate.exists()
    assert main(["checkpoint", "--ledger", str(ledger), "--key", f"{key}.pub"]) == 1
    assert "is a public key" in _error(capsys)


def test_verify_json_is_one_line(ledger: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--ledger", str(ledger), "--json"]) == 0
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 1 and json.loads(out)["ok"] is True


def test_blast_of_an_unknown_fact_is_only_the_error(
    tmp_path: Path, ledger: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    receipts = tmp_path / "receipts"
    receipts.mkdir()
    argv = ["blast", "--ledger", str(ledger), "--receipts", str(receipts), "--fact", "nope"]
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "error: --fact nope: not in this ledger; check the fact id\n"


def test_every_unset_variable_is_named_in_one_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ACS_TEST_FK", "ACS_TEST_T1", "ACS_TEST_T2"):
        monkeypatch.delenv(name, raising=False)
    argv = ["serve", "--ledger", str(tmp_path / "l.jsonl"), "--forget-key-env", "ACS_TEST_FK"]
    argv += ["--http", "--token-env", "ACS_TEST_T1", "--token-env", "ACS_TEST_T2"]
    assert main(argv) == 1
    assert _error(capsys) == (
        "error: environment variables not set: ACS_TEST_FK (forget_key_env), ACS_TEST_T1 "
        "(server.tokens[0] (gateway)), ACS_TEST_T2 (server.tokens[1] (gateway)); set them "
        "(non-empty) or remove them from the configuration"
    )
    assert list(tmp_path.iterdir()) == []

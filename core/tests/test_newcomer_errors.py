"""The mistakes a newcomer makes while following the docs, each one line that names the problem
and the fix, exit 1, nothing created: a typo in a memory.toml key, ``verify`` (or
``certificate verify --ledger``) on a file that is not a ledger, ``certificate verify`` with the
wrong key or a missing file, a ``.sqlite`` path that is not a database, an ``--out`` in a missing
folder, a PostgreSQL URL without its password."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import _hint, main


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    return err.strip()


def _files(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ('ledger = "l.jsonl"\nforget_key_evn = "K"\n', "forget_key_evn: Extra inputs are not"),
        ('ledger = "l.jsonl"\n[servr]\nport = 1\n', "servr: Extra inputs are not permitted"),
        ('ledger = "l.jsonl"\n[[server.tokens]]\nenv = "T"\nrol = "gateway"\n', "tokens.0.rol"),
    ],
)
def test_a_mistyped_config_key_names_the_key_meant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, hint: str
) -> None:
    config = tmp_path / "memory.toml"
    config.write_text(text)
    before = _files(tmp_path)
    assert main(["sweep", "--config", str(config), "--reason", "r", "--dry-run"]) == 1
    err = _error(capsys)
    assert hint in err
    meant = {"forget_key_evn": "forget_key_env", "servr": "server", "rol": "role"}
    key = next(k for k in meant if k in text)
    assert err.endswith(f"(an unknown key; did you mean {meant[key]}?)")
    assert _files(tmp_path) == before


def test_an_unknown_key_with_no_close_match_lists_the_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "memory.toml"
    config.write_text('ledger = "l.jsonl"\n[verify]\nzzzz = 1\n')
    assert main(["sweep", "--config", str(config), "--reason", "r", "--dry-run"]) == 1
    assert _error(capsys).endswith(
        "verify.zzzz: Extra inputs are not permitted (an unknown key; the keys here are "
        "attempts, delay_ms)"
    )


def test_a_mistyped_store_setting_names_the_setting_meant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "memory.toml"
    config.write_text(
        'ledger = "l.jsonl"\n[[stores]]\nname = "notes"\ntype = "memory"\nlag_check = 1\n'
    )
    with Ledger(str(tmp_path / "l.jsonl"), forget_key=None) as ledger:
        fact = ledger.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")
    before = {name: (tmp_path / name).read_bytes() for name in _files(tmp_path)}
    forget = ["forget", "--config", str(config), "--fact", fact.fact_id, "--reason", "r"]
    assert main(forget) == 1
    err = _error(capsys)
    prefix = f"error: {config}: stores[0] (notes): lag_check: Extra inputs are not permitted"
    assert err.startswith(prefix)  # the file named: it is where the typo is
    assert err.endswith("(an unknown key; did you mean lag_checks?)")
    assert {name: (tmp_path / name).read_bytes() for name in _files(tmp_path)} == before


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("notes.txt", b"hello\n"),
        ("other.jsonl", b'{"a": 1}\n'),
        ("server.key", b"-----BEGIN PRIVATE KEY-----\nMC4CAQ\n-----END PRIVATE KEY-----\n"),
    ],
)
def test_verify_of_a_file_that_is_not_a_ledger_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: bytes
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    assert main(["verify", "--ledger", str(path)]) == 1
    assert _error(capsys) == (
        f"error: {path} is not a ledger: no line of it is a ledger event (a JSON object with "
        "eventId and kind); check the path"
    )
    assert _files(tmp_path) == [name] and path.read_bytes() == content


def test_verify_still_reports_an_edited_line_of_a_real_ledger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ledger.jsonl"
    with Ledger(str(path), forget_key=None) as ledger:
        for n in range(3):
            ledger.assert_fact(subject="s", predicate=f"p{n}", value=n, space="org", actor="a")
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"not json\n" + b"".join(lines[1:]))
    assert main(["verify", "--ledger", str(path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"FAILED: {path}: first bad event 1: not a valid JSON event")


def test_an_empty_jsonl_file_still_verifies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(b"")
    assert main(["verify", "--ledger", str(path)]) == 0
    assert capsys.readouterr().out.startswith(f"ok: {path}: 0 events")


@pytest.fixture
def certified(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A forgotten fact's certificate ``cert.json``, signed by ``server.key``; ``other.key``."""
    ledger = tmp_path / "ledger.jsonl"
    with Ledger(str(ledger), forget_key=None) as opened:
        fact = opened.assert_fact(subject="u", predicate="email", value="a@b", space="o", actor="a")
    for key in ("server.key", "other.key"):
        assert main(["keygen", "--out", str(tmp_path / key)]) == 0
    forget = ["forget", "--ledger", str(ledger), "--fact", fact.fact_id, "--reason", "r"]
    cert = tmp_path / "cert.json"
    assert main([*forget, "--certificate", str(cert), "--key", str(tmp_path / "server.key")]) == 0
    capsys.readouterr()
    return tmp_path


def test_certificate_verify_with_the_wrong_key_says_which_key_to_pass(
    certified: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = certified / "other.key.pub"
    assert main(["certificate", "verify", str(certified / "cert.json"), "--key", str(other)]) == 1
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"FAILED: {certified / 'cert.json'}: signature: no trusted key matches")
    assert f"(--key {other} is key " in out
    assert out.endswith(
        "; pass the public key of the key that signed it (the forget's --key, "
        "or the config's key, with .pub)"
    )
    good = ["--key", str(certified / "server.key.pub")]
    assert main(["certificate", "verify", str(certified / "cert.json"), *good]) == 0


def test_certificate_verify_of_a_missing_file_or_against_a_non_ledger(
    certified: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _files(certified)
    key = ["--key", str(certified / "server.key.pub")]
    missing = certified / "nocert.json"
    assert main(["certificate", "verify", str(missing), *key]) == 1
    assert _error(capsys) == f"error: {missing}: no such certificate file; check the path"
    cert = str(certified / "cert.json")
    toml = certified / "memory.toml"
    toml.write_text('ledger = "ledger.jsonl"\n')
    assert main(["certificate", "verify", cert, *key, "--ledger", str(toml)]) == 1
    assert _error(capsys).startswith(f"error: {toml} is not a ledger: ")
    assert _files(certified) == sorted([*before, "memory.toml"])


def test_a_sqlite_path_that_is_not_a_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("agent_custody_state_events_sqlite")
    path = tmp_path / "ledger.sqlite"
    path.write_text("hello\n")
    for command in (["facts"], ["verify"]):
        assert main([*command, "--ledger", str(path)]) == 1
        assert _error(capsys) == (
            f"error: cannot open {path}: file is not a database; check the path: a .sqlite or "
            ".db ledger is a SQLite database"
        )
    assert _files(tmp_path) == ["ledger.sqlite"]


def test_export_into_a_missing_folder_says_to_create_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with Ledger("ledger.jsonl", forget_key=None) as ledger:
        ledger.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")
    before = _files(tmp_path)
    assert main(["export", "--ledger", "ledger.jsonl", "--out", "nodir/x.jsonl"]) == 1
    assert _error(capsys) == (
        "error: --out nodir/x.jsonl: the folder nodir does not exist; create it first (no "
        "command creates a missing folder)"
    )
    assert _files(tmp_path) == before


def test_a_postgres_url_without_its_password_says_where_to_put_it() -> None:
    # libpq's own words when the server asks for a password and none was given.
    message = (
        'cannot open postgresql://app@db/mem: connection failed: connection to server at "db", '
        "port 5432 failed: fe_sendauth: no password supplied"
    )
    assert _hint(message) == (
        "; give the password in the URL (postgresql://user:PASSWORD@host/db) or, to keep it out "
        "of files, in PGPASSWORD or ~/.pgpass"
    )
    assert _hint("cannot open x: connection refused") == ""


def test_a_ledger_whose_first_lines_were_replaced_is_still_verified(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The not-a-ledger check looks for any event in the file, not in its first lines: a ledger
    whose first 25 lines were overwritten is reported as tampered, at its first event."""
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        for i in range(30):
            ledger.assert_fact(subject=f"s{i}", predicate="p", value=i, space="o", actor="a")
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[:25] = ["not json"] * 25
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["verify", "--ledger", str(path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"FAILED: {path}: first bad event 1: not a valid JSON event")

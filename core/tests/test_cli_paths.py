"""Paths do what a careful user expects (issue 11.6): nothing created by mistake, nothing replaced
without ``--force``, no symlink followed silently, one clear line per refusal."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_custody_state.cli import main


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    "command",
    [
        ["export", "--out", "OUT"],
        ["sweep", "--before", "2026-01-01T00:00:00Z", "--reason", "r"],
        ["repair"],
    ],
)
def test_commands_that_read_a_ledger_refuse_a_missing_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    missing = tmp_path / "typo.jsonl"
    argv = [a.replace("OUT", str(tmp_path / "out.jsonl")) for a in command]
    assert main([argv[0], "--ledger", str(missing), *argv[1:]]) == 1
    assert "no such ledger" in _error(capsys)
    assert list(tmp_path.iterdir()) == []  # nothing created: no ledger, no lock, no output


def test_import_never_creates_a_folder(
    tmp_path: Path, ledger: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    export = tmp_path / "export.jsonl"
    assert main(["export", "--ledger", str(ledger), "--out", str(export)]) == 0
    capsys.readouterr()
    target = tmp_path / "missing" / "l.jsonl"
    assert main(["import", "--ledger", str(target), "--from", str(export)]) == 1
    assert "the folder" in _error(capsys) and not target.parent.exists()


def test_export_refuses_to_replace_without_force(
    tmp_path: Path, ledger: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text("precious\n")
    assert main(["export", "--ledger", str(ledger), "--out", str(out)]) == 1
    assert "already exists; pass --force" in _error(capsys)
    assert out.read_text() == "precious\n"
    assert main(["export", "--ledger", str(ledger), "--out", str(out), "--force"]) == 0
    assert out.read_bytes() == ledger.read_bytes()
    assert oct(out.stat().st_mode & 0o777) == "0o600"  # an export holds every value


def test_export_never_replaces_a_symlink(
    tmp_path: Path, ledger: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "elsewhere.jsonl"
    target.write_text("")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    assert main(["export", "--ledger", str(ledger), "--out", str(link)]) == 1
    assert "symbolic link" in _error(capsys)
    assert main(["export", "--ledger", str(ledger), "--out", str(link), "--force"]) == 0
    assert link.is_symlink() and target.read_bytes() == ledger.read_bytes()


def test_export_to_a_folder_or_a_missing_folder_is_refused(
    tmp_path: Path, ledger: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", "--ledger", str(ledger), "--out", str(tmp_path)]) == 1
    assert "is a folder" in _error(capsys)
    assert main(["export", "--ledger", str(ledger), "--out", str(tmp_path / "no" / "x")]) == 1
    assert "does not exist" in _error(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.jsonl", "ledger.jsonl.lock"]


def test_export_dash_is_standard_output(ledger: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "--ledger", str(ledger), "--out", "-"]) == 0
    out = capsys.readouterr()
    assert out.out.encode() == ledger.read_bytes()
    assert "to standard output" in out.err


def test_a_failed_export_leaves_no_partial(
    tmp_path: Path,
    ledger: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def broken_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    out = tmp_path / "out.jsonl"
    assert main(["export", "--ledger", str(ledger), "--out", str(out)]) == 1
    assert "Input/output error" in _error(capsys)
    assert not out.exists() and not any(".partial" in p.name for p in tmp_path.iterdir())


def test_import_names_the_line_of_bytes_that_are_not_utf8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\n\xff\xfe{}\n")
    assert main(["import", "--ledger", str(tmp_path / "l.jsonl"), "--from", str(bad)]) == 1
    assert _error(capsys).startswith(f"error: {bad}:2: not UTF-8")
    assert main(["import", "--ledger", str(tmp_path / "l.jsonl"), "--from", str(tmp_path)]) == 1
    assert "is a folder" in _error(capsys)


@pytest.mark.parametrize(
    ("name", "warned"),
    [("l.sqlit", ".sqlite"), ("l.jsnl", None), ("l.dbb", ".db"), ("l.jsonl", None), ("l", None)],
)
def test_a_suffix_that_looks_like_a_typo_is_warned_about_on_the_startup_line(
    tmp_path: Path, name: str, warned: str | None
) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "agent_custody_state", "serve", "--ledger", str(tmp_path / name)],
        capture_output=True,
        text=True,
        input="",  # a pipe at its end: /dev/null is refused, it is no MCP client
        timeout=60,
    )
    startup = done.stderr.splitlines()[0]
    if warned is None:
        assert "warning" not in startup, startup
    else:
        assert f"not {warned}: it is opened as a jsonl ledger" in startup, startup


def test_an_environment_variable_that_is_not_json_is_named(tmp_path: Path) -> None:
    import subprocess
    import sys

    env = {**os.environ, "AGENT_CUSTODY_SERVER": "notjson", "AGENT_CUSTODY_BLOCK_PLUGINS": ""}
    done = subprocess.run(
        [sys.executable, "-m", "agent_custody_state", "serve", "--ledger", str(tmp_path / "l")],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        env=env,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("error: AGENT_CUSTODY_SERVER: not valid JSON"), done.stderr
    assert "EnvSettingsSource" not in done.stderr and list(tmp_path.iterdir()) == []

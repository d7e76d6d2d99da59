"""``Ledger(..., read_only=True)`` and the command line's reads on a JSONL ledger: the folder is
left byte-identical (no ``.lock``, no torn line cut, no sidecar), the complete lines are read,
and every write is refused with code ``read_only`` (docs/decisions.md, "Read-only opens").
SQLite: ``plugins/events-sqlite/tests/test_sqlite_read_only.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.backends.jsonl import JsonlBackend
from agent_custody_state.cli import main
from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state_conformance.readonly import (
    READ_COMMANDS,
    WRITES,
    folder_files,
    run_read_command,
)

FACT = {"subject": "s", "predicate": "p", "space": "o", "actor": "a"}
TORN = b'{"eventId":"torn-by-a-cr'

#: Every write of the public API, called with arguments it would accept on a writable ledger.


def torn_ledger(folder: Path) -> tuple[Path, str]:
    """A JSONL ledger of two facts (the second superseding nothing), its ``.lock`` removed
    (an auditor's copy) and a torn final line after them; the first fact's id."""
    path = folder / "ledger.jsonl"
    with Ledger(path) as ledger:
        first = ledger.assert_fact(**FACT, value="one")
        ledger.assert_fact(**{**FACT, "subject": "t"}, value="two")
    Path(f"{path}.lock").unlink()
    with open(path, "ab") as fh:
        fh.write(TORN)
    return path, first.fact_id


def test_a_read_only_open_reads_the_complete_lines_and_changes_no_file(tmp_path: Path) -> None:
    path, fact_id = torn_ledger(tmp_path)
    before = folder_files(tmp_path)
    with Ledger(path, read_only=True) as ledger:
        assert ledger.read_only
        assert sorted(f.value for f in ledger.as_of()) == ["one", "two"]
        assert ledger.count() == 2
        assert [e.kind for e in ledger.history(fact_id)] == ["assert"]
        assert len(list(ledger.export())) == 2
        assert ledger.as_of(tx_at="2000-01-01T00:00:00Z") == []
        assert ledger.get(fact_id) is not None
    assert folder_files(tmp_path) == before
    assert path.read_bytes().endswith(TORN)  # not cut off, no ``.torn-*`` record


@pytest.mark.parametrize("write", list(WRITES))
def test_every_write_is_refused_and_changes_no_file(tmp_path: Path, write: str) -> None:
    path, fact_id = torn_ledger(tmp_path)
    before = folder_files(tmp_path)
    with Ledger(path, read_only=True) as ledger:
        with pytest.raises(LedgerError) as refused:
            WRITES[write](ledger, fact_id)
        operation = "assert_fact" if write == "supersede" else write  # a supersession asserts
        assert str(refused.value) == f"{path} is opened read-only; {operation} writes"
        assert refused.value.code == "read_only"
        assert ledger.count() == 2  # still reads after the refusal
    assert folder_files(tmp_path) == before


def test_the_backend_refuses_a_write_section_and_a_repair(tmp_path: Path) -> None:
    path, _ = torn_ledger(tmp_path)
    before = folder_files(tmp_path)
    backend = JsonlBackend(path, read_only=True)
    try:
        with pytest.raises(EventBackendError, match="opened read-only; its write sections"):
            backend.repair()
        with pytest.raises(EventBackendError, match="opened read-only"):
            with backend.transaction():
                pass
    finally:
        backend.close()
    assert folder_files(tmp_path) == before


def test_an_existing_lock_file_is_used_and_left_as_it_is(tmp_path: Path) -> None:
    path, _ = torn_ledger(tmp_path)
    Path(f"{path}.lock").write_bytes(b"")
    before = folder_files(tmp_path)
    with Ledger(path, read_only=True) as ledger:
        assert ledger.count() == 2
    assert folder_files(tmp_path) == before


@pytest.mark.parametrize("name", ["missing.jsonl", "missing.sqlite"])
def test_a_location_that_is_not_there_is_refused_and_nothing_created(
    tmp_path: Path, name: str
) -> None:
    with pytest.raises(LedgerError, match="no such ledger; a read-only open never creates one"):
        Ledger(tmp_path / name, read_only=True)
    with pytest.raises(EventBackendError, match="no such ledger"):
        JsonlBackend(tmp_path / name, read_only=True)
    assert list(tmp_path.iterdir()) == []


def test_a_writable_open_still_repairs_the_torn_line(tmp_path: Path) -> None:
    """The contrast that makes the tests above meaningful: without ``read_only`` the same open
    creates the lock, cuts the torn line and records it."""
    path, _ = torn_ledger(tmp_path)
    before = folder_files(tmp_path)
    Ledger(path).close()
    after = folder_files(tmp_path)
    assert after != before
    assert "ledger.jsonl.lock" in after
    assert any(name.startswith("ledger.jsonl.torn-") for name in after)


def test_crypto_shred_read_only_reads_values_and_creates_no_key_store(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    with Ledger(path, forget_mode="crypto-shred") as ledger:
        fact = ledger.assert_fact(**FACT, value="secret")
    before = folder_files(tmp_path)
    with Ledger(path, forget_mode="crypto-shred", read_only=True) as ledger:
        assert ledger.get(fact.fact_id).value == "secret"  # type: ignore[union-attr]
        with pytest.raises(LedgerError, match="opened read-only; forget writes"):
            ledger.forget(fact_id=fact.fact_id, actor="a", reason="r")
    assert folder_files(tmp_path) == before
    plain = tmp_path / "plain.jsonl"
    with Ledger(plain) as ledger:
        ledger.assert_fact(**FACT, value="v")
    before = folder_files(tmp_path)
    with pytest.raises(LedgerError, match="records plain mode"):
        Ledger(plain, forget_mode="crypto-shred", read_only=True)
    with pytest.raises(LedgerError, match="no such key store"):
        Ledger(path, forget_mode="crypto-shred", key_store=str(tmp_path / "k"), read_only=True)
    assert folder_files(tmp_path) == before


def test_read_only_with_a_checkpoint_key_or_not_a_bool_is_refused(tmp_path: Path) -> None:
    path, _ = torn_ledger(tmp_path)
    with pytest.raises(LedgerError, match="a read-only ledger never writes"):
        Ledger(path, read_only=True, checkpoint_key="key.pem")
    with pytest.raises(LedgerError, match="read_only must be True or False"):
        Ledger(path, read_only="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize("command", READ_COMMANDS, ids=lambda c: c[0])
def test_a_read_command_leaves_the_folder_byte_identical(
    tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "ledger"
    folder.mkdir()
    path, fact_id = torn_ledger(folder)
    before = folder_files(folder)
    run_read_command(command, path, fact_id, tmp_path / "out.jsonl")
    capsys.readouterr()
    assert folder_files(folder) == before


def test_the_console_script_reads_without_changing_the_folder(tmp_path: Path) -> None:
    path, _ = torn_ledger(tmp_path)
    before = folder_files(tmp_path)
    script = Path(sys.executable).with_name("agent-custody-memory")
    run = subprocess.run(
        [str(script), "facts", "--ledger", str(path), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert '"two"' in run.stdout
    assert folder_files(tmp_path) == before


def test_repair_still_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = torn_ledger(tmp_path)
    assert main(["repair", "--ledger", str(path)]) == 0
    assert "cut off" in capsys.readouterr().out
    assert not path.read_bytes().endswith(TORN)


@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0,
    reason="root ignores file permissions, so a read-only folder cannot be made here",
)
def test_a_ledger_in_a_read_only_folder_reads(tmp_path: Path) -> None:
    folder = tmp_path / "mount"
    folder.mkdir()
    path, _ = torn_ledger(folder)
    before = folder_files(folder)
    folder.chmod(0o555)
    path.chmod(0o444)
    try:
        with Ledger(path, read_only=True) as ledger:
            assert ledger.count() == 2
        assert main(["facts", "--ledger", str(path)]) == 0
    finally:
        folder.chmod(0o755)
    assert folder_files(folder) == before

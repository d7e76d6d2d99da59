"""The nineteenth review: the command line under a newcomer's mistakes and hostile inputs.

``checkpoint --checkpoints`` appended to any file (the ledger itself) and blocked on a FIFO;
``verify --checkpoint`` named no file in its errors and read ``/dev/zero`` without end; a
``--key-store`` that is not a key store was opened (a WAL database set to DELETE, an empty file
made a key store), and a writer's mistyped one made a new, empty key store beside sealed values;
``serve --shutdown-delay`` over stdio was ignored; ``keygen --out ''`` was a traceback; a closed
standard output was a traceback, and ``serve`` wrote its answers into the ledger's lock file;
``demo | head`` printed a task group's traceback and left its folder; ``pack``/``explain --out
--force`` replaced their inputs; several messages named the wrong thing.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main

sys.path.insert(0, str(Path(__file__).parent / "extras"))

CLI = [sys.executable, "-m", "agent_custody_state"]


def _ledger(tmp_path: Path, name: str = "l.jsonl") -> Path:
    path = tmp_path / name
    with Ledger(path) as ledger:
        ledger.assert_fact(subject="s", predicate="p", value="v", space="org", actor="a")
    return path


def _key(tmp_path: Path) -> tuple[Path, Path]:
    assert main(["keygen", "--out", str(tmp_path / "k")]) == 0
    return tmp_path / "k", tmp_path / "k.pub"


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_fifo()
    }


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    return err.strip()


def _run(*argv: str, prefix: Any = (), **options: Any) -> subprocess.CompletedProcess[str]:
    command = [*prefix, *CLI, *argv]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=30, check=False, **options
    )


@pytest.mark.parametrize("kind", ["ledger", "binary", "key", "fifo", "folder", "device"])
def test_checkpoint_adds_only_to_a_checkpoints_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    ledger = _ledger(tmp_path)
    key, _ = _key(tmp_path)
    target = {
        "ledger": ledger,
        "binary": tmp_path / "blob",
        "key": key,
        "fifo": tmp_path / "fifo",
        "folder": tmp_path / "dir",
        "device": Path(os.devnull),
    }[kind]
    if kind == "binary":
        target.write_bytes(b"\x9e\x00\xff" * 100)
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "folder":
        target.mkdir()
    (tmp_path / "l.jsonl.lock").unlink(missing_ok=True)
    before = _tree(tmp_path)
    # In a child process: on the old code a FIFO blocked the append for good.
    done = _run(
        "checkpoint", "--ledger", str(ledger), "--key", str(key), "--checkpoints", str(target)
    )
    assert done.returncode == 1, done
    assert done.stderr.startswith(f"error: --checkpoints {target}"), done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1
    assert _tree(tmp_path) == before  # no note in the ledger, no lock file
    assert main(["verify", "--ledger", str(ledger)]) == 0


def test_checkpoint_adds_to_a_new_or_a_checkpoints_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = _ledger(tmp_path)
    key, pub = _key(tmp_path)
    kept = tmp_path / "kept.checkpoints"
    for _ in range(2):
        argv = ["checkpoint", "--ledger", str(ledger), "--key", str(key), "--checkpoints"]
        assert main([*argv, str(kept)]) == 0
    capsys.readouterr()
    argv = ["verify", "--ledger", str(ledger), "--key", str(pub), "--checkpoint", str(kept)]
    assert main(argv) == 0
    assert "2 checkpoint(s)" in capsys.readouterr().out


def test_checkpoint_reads_its_key_before_the_ledger_is_opened(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = _ledger(tmp_path)
    (tmp_path / "l.jsonl.lock").unlink()
    before = _tree(tmp_path)
    assert main(["checkpoint", "--ledger", str(ledger), "--key", str(tmp_path / "nokey")]) == 1
    assert "nokey" in _error(capsys)
    assert _tree(tmp_path) == before  # no lock file left by a refused command


def test_verify_checkpoint_errors_name_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = _ledger(tmp_path)
    _, pub = _key(tmp_path)
    binary, note = tmp_path / "binary", tmp_path / "note.json"
    binary.write_bytes(b"\x9e\x00")
    note.write_text('{"a": 1}\n')
    base = ["verify", "--ledger", str(ledger), "--key", str(pub), "--checkpoint"]
    assert main([*base, str(binary)]) == 1
    assert _error(capsys).startswith(f"error: --checkpoint {binary}: not UTF-8 text")
    assert main([*base, str(note)]) == 1
    assert _error(capsys).endswith(f"(--checkpoint {note})")


def _small_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def test_verify_checkpoint_refuses_a_device(tmp_path: Path) -> None:
    """``/dev/zero`` was read until memory ran out (a child process with 2 GiB at most)."""
    ledger = _ledger(tmp_path)
    done = _run(
        "verify", "--ledger", str(ledger), "--checkpoint", "/dev/zero", preexec_fn=_small_memory
    )
    assert "Traceback" not in done.stderr, done.stderr[-300:]
    assert done.returncode == 1
    assert done.stderr == "error: --checkpoint /dev/zero is a device; name a checkpoints file\n"


def _wal_database(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE events (x)")
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    "argv", ["facts", "export --out -", "forget --fact f --reason r", "verify"]
)
def test_a_sqlite_file_that_is_not_a_key_store_is_not_opened(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: str
) -> None:
    ledger = _ledger(tmp_path)
    other = tmp_path / "other.sqlite"
    _wal_database(other)
    before = other.read_bytes()
    assert main([*argv.split(), "--ledger", str(ledger), "--key-store", str(other)]) == 1
    assert "is a SQLite database but not a key store" in _error(capsys)
    after = other.read_bytes()
    assert after[18:20] == b"\x02\x02"  # still WAL (it was set to DELETE, then refused)
    assert after == before


@pytest.mark.parametrize("argv", [["facts"], ["verify"]])
def test_a_reading_command_makes_no_key_store_of_an_empty_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    ledger = _ledger(tmp_path)
    empty = tmp_path / "keys"
    empty.touch()
    assert main([*argv, "--ledger", str(ledger), "--key-store", str(empty)]) == 1
    assert "is an empty file, not a key store" in _error(capsys)
    assert empty.read_bytes() == b""


def test_shutdown_delay_with_stdio_is_a_usage_error(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    done = _run("serve", "--ledger", str(ledger), "--shutdown-delay", "5", input="")
    assert done.returncode == 2, done
    assert done.stderr.startswith("error: --shutdown-delay applies to HTTP only")
    assert "--http" in done.stderr and "Traceback" not in done.stderr
    assert not ledger.exists()


def test_shutdown_delay_in_a_config_file_stays_quiet_over_stdio(tmp_path: Path) -> None:
    """One config file often serves both transports: the key is not refused over stdio."""
    config = tmp_path / "memory.toml"
    config.write_text('ledger = "l.jsonl"\n[server]\nshutdown_delay = 5\n')
    done = _run("serve", "--config", str(config), input="")
    assert done.returncode == 0, done
    assert "error" not in done.stderr and "HTTP only" not in done.stderr


@pytest.mark.parametrize(("out", "said"), [("", "--out is empty"), ("DIR", "is a folder")])
@pytest.mark.parametrize("force", [[], ["--force"]])
def test_keygen_out_empty_or_a_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], out: str, said: str, force: list[str]
) -> None:
    out = str(tmp_path) if out == "DIR" else out
    before = _tree(tmp_path)
    assert main(["keygen", "--out", out, *force]) == 1
    assert said in _error(capsys)
    assert _tree(tmp_path) == before


def _closed_stdout(*argv: str, **options: Any) -> subprocess.CompletedProcess[str]:
    return _run(*argv, prefix=["sh", "-c", 'exec "$@" >&-', "sh"], **options)


@pytest.mark.parametrize("argv", [["facts"], ["export", "--out", "-"]])
def test_a_closed_stdout_is_an_error_not_a_traceback(tmp_path: Path, argv: list[str]) -> None:
    ledger = _ledger(tmp_path)
    done = _closed_stdout(*argv[:1], "--ledger", str(ledger), *argv[1:])
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1
    assert done.stderr.startswith("error: standard output is closed"), done.stderr


def test_serve_over_stdio_with_stdout_closed_writes_into_no_file(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    before = _tree(tmp_path)
    request = '{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
    done = _closed_stdout("serve", "--ledger", str(ledger), input=request)
    assert done.returncode == 2, done
    assert "stdout is closed" in done.stderr
    after = _tree(tmp_path)
    assert all(b"jsonrpc" not in data for data in after.values()), after
    assert after["l.jsonl"] == before["l.jsonl"]


@pytest.fixture
def worked_site(tmp_path: Path) -> Any:
    import worked

    return worked.build(tmp_path)


@pytest.mark.parametrize("what", ["ledger", "receipt", "sign"])
@pytest.mark.parametrize("command", ["pack", "explain"])
def test_out_never_replaces_an_input(
    worked_site: Any, capsys: pytest.CaptureFixture[str], what: str, command: str
) -> None:
    from worked import F1, R1

    site = worked_site
    out = {"ledger": site.ledger, "receipt": site.receipts / f"{R1}.json", "sign": site.pack_key}
    target = out[what]
    before = _tree(site.root)
    inputs = ["--ledger", str(site.ledger), "--receipts", str(site.receipts)]
    if command == "pack":
        argv = ["pack", *inputs, "--fact", F1]
    else:
        argv = ["explain", *inputs, "--receipt", R1]
    argv += ["--out", str(target), "--sign", str(site.pack_key), "--force"]
    assert main(argv) == 1
    err = _error(capsys)
    assert err.startswith(f"error: --out {target} is ")
    assert _tree(site.root) == before


def test_messages_name_what_the_path_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger = _ledger(tmp_path)
    key, pub = _key(tmp_path)
    fifo, folder, file = tmp_path / "fifo", tmp_path / "dir", tmp_path / "c.json"
    os.mkfifo(fifo)
    folder.mkdir()
    file.write_text("{}")
    config = tmp_path / "memory.toml"
    config.write_text(f'ledger = "l.jsonl"\nkey = "k"\ncertificates = "{file.name}"\n')
    cases: list[tuple[Any, str]] = [
        (["import", "--ledger", str(tmp_path / "n.jsonl"), "--from", str(fifo)], "is a FIFO"),
        (["certificate", "verify", str(folder), "--key", str(pub)], "is a folder"),
        (
            ["certificate", "reapply", str(file), "--key", str(pub), "--ledger", str(ledger)],
            "is a file, not a folder of certificates",
        ),
        (
            f"forget --ledger {ledger} --fact f --reason r --certificate {folder} --key {key}",
            "is a folder; name the file in it",
        ),
        (
            f"sweep --ledger {ledger} --before 2020-01-01T00:00:00Z --reason r --certificates "
            f"{file} --key {key}",
            "is a file, not a folder",
        ),
        (
            f"sweep --config {config} --reason r --before 2020-01-01T00:00:00Z",
            f"certificates {file} is a file, not a folder",
        ),
    ]
    for argv, said in cases:
        argv = argv.split() if isinstance(argv, str) else argv
        before = _tree(tmp_path)
        assert main(argv) == 1, argv
        assert said in _error(capsys), argv
        assert _tree(tmp_path) == before


def test_an_out_that_cannot_be_written_is_named_as_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not the temporary file beside it (``.x.jsonl.123.partial``); root writes anywhere, so
    the refusal is the operating system's, stood in for."""
    from agent_custody_state.cli import output

    def refused(path: Any, *_: Any) -> int:
        raise PermissionError(13, "Permission denied", str(path))

    fake = types.SimpleNamespace(**{k: getattr(os, k) for k in dir(os) if not k.startswith("__")})
    fake.open = refused
    monkeypatch.setattr(output, "os", fake)
    ledger = _ledger(tmp_path)
    out = tmp_path / "x.jsonl"
    assert main(["export", "--ledger", str(ledger), "--out", str(out)]) == 1
    assert _error(capsys) == f"error: {out}: cannot write in {tmp_path} (Permission denied)"


@pytest.mark.parametrize("command", ["forget", "sweep"])
def test_a_forget_with_a_new_key_store_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """``--key-store TYPO`` made a new, empty key store: with ``--no-digest`` the fact was
    reported forgotten while its data key stayed in the key store the ledger records."""
    ledger = tmp_path / "l.jsonl"
    with Ledger(ledger, forget_mode="crypto-shred") as opened:
        fact = opened.assert_fact(subject="s", predicate="p", value="v", space="org", actor="a")
    typo = tmp_path / "typo.keys"
    if command == "forget":
        argv = ["forget", "--fact", fact.fact_id]
    else:
        argv = ["sweep", "--before", "2999-01-01T00:00:00Z"]
    base = ["--ledger", str(ledger), "--reason", "r", "--no-digest"]
    assert main([*argv, *base, "--key-store", str(typo)]) == 1
    assert _error(capsys).startswith(f"error: --key-store {typo}: no such key store; ")
    assert not typo.exists()
    assert main(["verify", "--ledger", str(ledger)]) == 0
    assert main([*argv, *base]) == 0  # with the key store it records: forgotten, key destroyed
    capsys.readouterr()
    assert main(["verify", "--ledger", str(ledger)]) == 0


def test_demo_into_a_closed_pipe_leaves_no_traceback_and_no_folder(tmp_path: Path) -> None:
    """``demo | head`` printed a task group's traceback (the BrokenPipeError inside it), and a
    stop before the tour's ``try`` left the temporary folder behind."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp)}
    proc = subprocess.Popen([*CLI, "demo"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.stdout.close()  # the reader leaves, as head does
    _, err = proc.communicate(timeout=60)
    assert b"Traceback" not in err, err.decode()[-2000:]
    assert proc.returncode == 1
    assert list(temp.iterdir()) == []
    closed = _closed_stdout("demo", env=env)
    assert closed.returncode == 1 and "standard output is closed" in closed.stderr
    assert "Traceback" not in closed.stderr
    assert list(temp.iterdir()) == []


def test_one_event_is_counted_in_the_singular(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmp_path / "one.jsonl"
    with Ledger(ledger) as book:
        book.assert_fact(space="s", actor="a", subject="acct:1", predicate="plan", value="pro")
    out = tmp_path / "one-export.jsonl"
    assert main(["export", "--ledger", str(ledger), "--out", str(out)]) == 0
    assert f"exported 1 event from {ledger} to {out}" in capsys.readouterr().err
    again = tmp_path / "again.jsonl"
    assert main(["import", "--ledger", str(again), "--from", str(out)]) == 0
    assert f"imported 1 event into {again}" in capsys.readouterr().err


def test_the_librarys_keep_digest_advice_names_the_flag() -> None:
    """A crypto-shred forget whose key is gone tells the library user to pass
    ``keep_digest=False``; the command line says which flag that is."""
    from agent_custody_state.cli import _hint

    message = "fact f: its key is gone from k.keys, ...; forget it with keep_digest=False"
    assert _hint(message) == "; on the command line, that is --no-digest"

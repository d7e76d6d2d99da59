"""The twentieth review's tidying: the temporaries a kill left, ``pack``'s second read of every
receipt file, and the demo's next steps under a runner.

- A file written whole or not at all goes through a ``.partial`` temporary; a process killed
  between writing it and linking it into place left the temporary for good (a certificates
  folder; an export's, holding every value, beside ``--out``). A start now removes those of a
  certificates folder, and a write of an ``--out`` file those of that file: only names of our
  exact pattern, regular files, of a process not running here, last written over an hour ago.
- ``pack`` read every receipt file twice (its bundles, then its summaries): once now.
- ``./dev demo`` runs the demo under nox, whose virtualenv is on the demo's ``PATH`` only: the
  next steps it printed (``agent-custody-memory ...``) were not found in the user's shell.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import nextsteps
from agent_custody_state.cli.output import output_file
from agent_custody_state.extras import bundles
from agent_custody_state.extras.pack import build_pack
from agent_custody_state.server.signing import generate_key_pair
from agent_custody_state.stores.flows import Custody

HEX = "0123456789abcdef"
OLD = 2 * 3600  # seconds: older than ``temporaries.STALE_AFTER``


def _dead_pid() -> int:
    """The pid of a process that has ended."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def _age(*paths: Path) -> None:
    then = time.time() - OLD
    for path in paths:
        os.utime(path, (then, then), follow_symlinks=False)


def _killed_while_keeping(folder: Path) -> Path:
    """What a SIGKILL between a certificate's temporary and its link leaves: the temporary."""
    child = (
        "import os, signal, sys\n"
        "from agent_custody_state.stores import archive\n"
        "os.link = lambda *a: os.kill(os.getpid(), signal.SIGKILL)\n"
        "archive.CertificateArchive(sys.argv[1]).keep('fact-1', {'payload': 'x'})\n"
    )
    done = subprocess.run([sys.executable, "-c", child, str(folder)], timeout=60)
    assert done.returncode == -signal.SIGKILL
    [left] = folder.iterdir()
    assert left.name.startswith(".fact-1.json.") and left.name.endswith(".partial")
    return left


def test_a_start_removes_the_temporaries_a_kill_left_and_nothing_else(tmp_path: Path) -> None:
    folder = tmp_path / "certs"
    folder.mkdir()
    killed = _killed_while_keeping(folder)
    dead = _dead_pid()
    intent = folder / f"..intent-{HEX}abcdefab.{dead}.1.{HEX}.partial"  # an intent's
    intent.write_text("{}")
    outside = tmp_path / "outside"
    outside.write_text("not ours")
    kept = {
        # a live writer: this process (another thread), a running one, and one just written
        folder / f".a.json.{os.getpid()}.1.{HEX}.partial": "x",
        folder / f".b.json.{os.getppid()}.1.{HEX}.partial": "x",
        # names that are not exactly ours
        folder / f".c.json.{dead}.partial": "x",
        folder / f"d.json.{dead}.1.{HEX}.partial": "x",
        folder / f".e.json.{dead}.1.{HEX}.partial.json": "x",
        folder / f".f.txt.{dead}.1.{HEX}.partial": "x",
        folder / "notes.partial": "x",
    }
    for path, text in kept.items():
        path.write_text(text)
    link = folder / f".g.json.{dead}.1.{HEX}.partial"
    link.symlink_to(outside)
    _age(killed, intent, link, *kept)
    young = folder / f".h.json.{dead}.1.{HEX}.partial"  # another host's, being written
    young.write_text("x")
    key, _, _ = generate_key_pair(tmp_path / "k.key")
    with Ledger(str(tmp_path / "l.jsonl")) as book:
        anyio.run(Custody(book, certificate_key=str(key), certificates=folder).resume)
    left = {p.name for p in folder.iterdir()}
    assert killed.name not in left and intent.name not in left  # before: kept for good
    assert left == {p.name for p in [*kept, link, young]}
    assert outside.read_text() == "not ours"


def test_a_write_of_an_out_file_removes_its_stale_temporaries(tmp_path: Path) -> None:
    """An export a kill left half-written (every value in it) goes at the next write of the
    same file; one whose pid is this process's now (reused) no longer blocks the write."""
    target = tmp_path / "export.jsonl"
    dead = _dead_pid()
    stale = [
        tmp_path / f".export.jsonl.{dead}.partial",
        tmp_path / f".export.jsonl.{dead}.{HEX}.partial",
    ]
    reused = tmp_path / f".export.jsonl.{os.getpid()}.partial"
    other = tmp_path / f".other.jsonl.{dead}.partial"
    for path in [*stale, reused, other]:
        path.write_text("SECRET value\n")
    _age(*stale, reused, other)
    with output_file(target) as fh:  # before: "cannot write in ... (File exists)"
        fh.write("new\n")
    assert target.read_text() == "new\n"
    assert {p.name for p in tmp_path.iterdir()} == {target.name, reused.name, other.name}


def test_pack_reads_each_receipt_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(Path(__file__).parent / "extras"))
    from gatewaysim import Gateway, seeded, text_result

    receipts = tmp_path / "receipts"
    receipts.mkdir()
    gw = Gateway(receipts, seeded(1), seeded(2))
    with Ledger(tmp_path / "l.jsonl") as ledger:
        ids: list[str] = []
        for i in range(4):
            rid = f"{i:08x}-0000-4000-8000-{i:012x}"
            [wrote] = ledger.assert_many(
                [
                    {
                        "subject": "acct",
                        "predicate": f"p{i}",
                        "value": f"v{i}",
                        "space": "org",
                        "actor": "a",
                        "receipt_id": rid,
                    }
                ]
            )
            gw.seen = ids[-1:]
            gw.call(
                rid,
                f"2026-09-01T10:00:0{i}.000Z",
                "memory.write",
                {"i": i},
                text_result({"written": [wrote.fact.to_dict()]}),
            )
            ids.append(wrote.fact_id)
        (receipts / "junk.json").write_text("{not json")
        (receipts / "nopayload.json").write_text('{"envelope": {"payload": ""}}')
        first = receipts / f"{0:08x}-0000-4000-8000-{0:012x}.json"
        (receipts / "zz-copy.json").write_bytes(first.read_bytes())  # the later file wins
        files = bundles.bundle_files(receipts)
        read: list[str] = []
        real = bundles.read_bytes

        def counted(path: Path) -> bytes:
            read.append(path.name)
            return real(path)

        monkeypatch.setattr(bundles, "read_bytes", counted)
        pack = build_pack(ledger, receipts, ids[0])
    assert sorted(read) == sorted(p.name for p in files)  # before: each one twice
    assert pack["missingReceipts"] == [] and len(pack["receipts"]) == 4
    assert pack["receipts"][f"{0:08x}-0000-4000-8000-{0:012x}"] == json.loads(first.read_bytes())


def test_the_next_steps_run_in_the_shell_a_runner_returns_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under nox (``./dev demo``) the demo's ``PATH`` finds the command in nox's virtualenv;
    the user's shell does not. The hints name it by its path, and run with the user's PATH.
    Before, they started ``agent-custody-memory``, which that shell did not find."""
    here = os.path.dirname(sys.executable)
    script = os.path.join(here, nextsteps.NAME)
    monkeypatch.setattr(sys, "argv", [script, "demo"])
    monkeypatch.setenv("PATH", f"{here}{os.pathsep}{os.defpath}")
    for marker in nextsteps.RUNNERS:
        monkeypatch.delenv(marker, raising=False)
    assert nextsteps.command() == nextsteps.NAME  # the user's own PATH finds it: by name
    monkeypatch.setenv("NOX_CURRENT_SESSION", "demo")
    nextsteps.print_next_steps(lambda _code, text: text, str(tmp_path / "l.jsonl"), keep=True)
    hints = [line.split("  #")[0].strip() for line in capsys.readouterr().out.splitlines()[2:]]
    assert len(hints) == 5 and all(h.startswith(shlex.quote(script) + " ") for h in hints)
    words = shlex.split(hints[-1])  # ``... --help``; the others need the demo's ledger
    shell = {**os.environ, "PATH": os.defpath, "NOX_CURRENT_SESSION": ""}
    done = subprocess.run(words, capture_output=True, text=True, timeout=60, env=shell)
    assert done.returncode == 0 and "usage" in done.stdout.lower(), done.stderr


@pytest.mark.parametrize("marker", nextsteps.RUNNERS)
def test_each_runner_is_recognised(monkeypatch: pytest.MonkeyPatch, marker: str) -> None:
    here = os.path.dirname(sys.executable)
    monkeypatch.setattr(sys, "argv", ["-m"])  # ``python -m agent_custody_state``
    monkeypatch.setenv("PATH", f"{here}{os.pathsep}{os.defpath}")
    for other in nextsteps.RUNNERS:
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv(marker, "1")
    assert nextsteps.command() == f"{shlex.quote(sys.executable)} -m agent_custody_state"


def test_a_ledger_path_is_quoted_for_the_shell() -> None:
    assert nextsteps.next_steps("/a b/l.jsonl", "x")[0] == "x facts --ledger '/a b/l.jsonl'"

"""Odd path names and the text read from ``/proc`` and READMEs (twenty-first review).

A ledger path may hold a newline or bytes that are not UTF-8 (Linux allows both; Python decodes
the bytes as ``\\udc80``-``\\udcff``). The commands worked on such a ledger, but an error or a
line naming it broke in two, and a line naming undecodable bytes stopped the command with a
``UnicodeEncodeError`` on a UTF-8 standard output. A process whose name was cut inside a UTF-8
character had no recorded start (``processes.process_start``).
"""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
from pathlib import Path

from agent_custody_state import Ledger
from agent_custody_state.cli.logs import console
from agent_custody_state.processes import process_start

CLI = [sys.executable, "-m", "agent_custody_state"]


def run(*argv: str | bytes | Path, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    done = subprocess.run(
        [*CLI, *argv],
        capture_output=True,
        cwd=cwd,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
        timeout=60,
    )
    assert b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
    return done


def seed(folder: Path, raw: bytes) -> str:
    with Ledger(folder / os.fsdecode(raw)) as ledger:
        return ledger.assert_fact(
            subject="s", predicate="p", value="v", space="org", actor="a"
        ).fact_id


def test_a_newline_in_a_path_keeps_each_line_one_line(tmp_path: Path) -> None:
    raw = b"new\nline.jsonl"
    fact_id = seed(tmp_path, raw)
    assert run("keygen", "--out", "k", cwd=tmp_path).returncode == 0
    missing = run("facts", "--ledger", raw + b".missing", cwd=tmp_path)
    assert missing.returncode == 1 and missing.stderr.count(b"\n") == 1, missing.stderr
    assert b"new\\nline.jsonl.missing: no such ledger" in missing.stderr
    exported = run("export", "--ledger", raw, "--out", raw + b".out", cwd=tmp_path)
    assert exported.returncode == 0 and exported.stderr.count(b"\n") == 1, exported.stderr
    cert = raw + b".cert"
    forget = ("forget", "--ledger", raw, "--fact", fact_id, "--reason", "r")
    forgot = run(*forget, "--certificate", cert, "--key", "k", cwd=tmp_path)
    assert forgot.returncode == 0 and forgot.stdout.count(b"\n") == 1, forgot.stdout
    assert forgot.stdout.endswith(b"certificate in new\\nline.jsonl.cert\n")
    checked = run("certificate", "verify", "--key", "k.pub", "--ledger", raw, cert, cwd=tmp_path)
    assert checked.returncode == 0 and checked.stdout.count(b"\n") == 1, checked.stdout
    # The certificate names the ledger as JSON does: one line, the newline escaped.
    payload = json.loads(
        base64.b64decode(json.loads((tmp_path / os.fsdecode(cert)).read_bytes())["payload"])
    )
    assert payload["predicate"]["media"]["location"] == str(tmp_path / os.fsdecode(raw))
    verified = run("verify", "--ledger", raw, cwd=tmp_path)  # its ok: line
    assert verified.returncode == 0 and verified.stdout.count(b"\n") == 1, verified.stdout
    assert verified.stdout.startswith(b"ok: new\\nline.jsonl: ")


def test_bytes_that_are_not_utf8_in_a_path_are_shown_escaped(tmp_path: Path) -> None:
    raw = b"bad\xff.jsonl"
    seed(tmp_path, raw)
    verified = run("verify", "--ledger", raw, "--json", cwd=tmp_path)
    assert verified.returncode == 0 and json.loads(verified.stdout)["ok"] is True
    exported = run("export", "--ledger", raw, "--out", raw + b".out", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert b"bad\\udcff.jsonl.out" in exported.stderr
    assert (tmp_path / os.fsdecode(raw + b".out")).read_bytes() == (
        tmp_path / os.fsdecode(raw)
    ).read_bytes()
    missing = run("history", "nope", "--ledger", raw + b".missing", cwd=tmp_path)
    assert missing.returncode == 1 and b"bad\\udcff.jsonl.missing" in missing.stderr
    # A table naming no path still prints; the keygen line names the undecodable key path.
    made = run("keygen", "--out", b"k\xfe", cwd=tmp_path)
    assert made.returncode == 0 and made.stdout.startswith(b"wrote k\\udcfe"), made.stdout


def test_the_servers_own_text_lines_stay_one_line() -> None:
    out = io.StringIO()
    console("agent-custody-memory: ledger a\nb.jsonl (jsonl, 0 events)", "text", out)
    assert out.getvalue() == "agent-custody-memory: ledger a\\nb.jsonl (jsonl, 0 events)\n"


def test_a_process_whose_name_is_cut_inside_a_character_has_a_start() -> None:
    """The kernel keeps 15 bytes of a process name: ``工作者日本語`` cut at 14 ends inside a
    character, and reading ``/proc/PID/stat`` as UTF-8 failed, so the process had no start."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "open('/proc/self/comm', 'wb').write('工作者日本語'.encode()[:14])\n"
            "print('named', flush=True)\n"
            "time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == b"named\n"
        stat = Path(f"/proc/{child.pid}/stat").read_bytes()
        assert b"\xe6\x97\xa5\xe6\x9c)" in stat  # the name ends inside a character
        started = int(stat[stat.rindex(b")") + 2 :].split()[19])
        found = process_start(child.pid)
        assert found is not None and found.endswith(f":{started}")
    finally:
        child.kill()
        child.wait()


def test_a_readme_is_read_as_utf8_under_an_ascii_locale(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text('```toml\n[[stores]]\nname = "vecteurs é"\n```\n', encoding="utf-8")
    code = (
        "import sys, pathlib\n"
        "from agent_custody_state_conformance.readme import readme_store_tables\n"
        "print(readme_store_tables(pathlib.Path(sys.argv[1])) == [{'name': 'vecteurs \\xe9'}])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(readme)],
        capture_output=True,
        env={**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"},
        timeout=60,
    )
    assert done.stdout == b"True\n", done.stderr.decode(errors="replace")

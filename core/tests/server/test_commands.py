"""``agent-custody-memory demo`` and the stdio startup line."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from servertest import CLI, run_cli

from agent_custody_state.cli.nextsteps import RUNNERS


def test_demo_runs_the_whole_tour() -> None:
    done = run_cli("demo", "--color", "always", timeout=120)
    assert done.returncode == 0, done.stderr
    assert "\033[1;36m1. " in done.stdout
    out = re.sub(r"\033\[[0-9;]*m", "", done.stdout)
    for expected in (
        "attested",
        "claimed",
        "is on legal hold",
        "confirmation must come through the receipts gateway",
        "accepts calls only through the receipts gateway",
        "erased; sha256 digest",
        'plan="pro" (attested)',
        "retracted=True",
        "stores: vectors",
        'mirror of the superseded fact: {"vectors": "verified"}',
        "signature verified: memory.read",
        'stores: {"vectors": "verified"}',
        "the chain verifies from genesis, forget included",
        "places named that no forget reaches (residualWindows)",
    ):
        assert expected in out, expected
    assert "assert, assert, assert, confirm, retract, hold, release, forget" in out
    # The bitemporal step reads "pro" as of the first write's transaction time.
    bitemporal = out.split("A bitemporal read")[1].split("\n\n")[0]
    assert 'plan="pro" (attested)' in bitemporal and "txAt" in bitemporal


def _next_steps(path: str) -> tuple[str, list[str]]:
    """The demo's output with ``PATH`` set to ``path``, as the user's (not a runner's: tests
    run under nox), and its closing hints (``--keep``)."""
    env = {"PATH": path, **dict.fromkeys(RUNNERS, "")}
    done = run_cli("demo", "--keep", "--color", "never", env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    steps = done.stdout.split("next steps")[1]
    hints = [line.strip().split("  #")[0].strip() for line in steps.splitlines()[1:]]
    return done.stdout, [hint for hint in hints if hint]


def test_demo_next_steps_run_as_printed() -> None:
    """The closing hints of ``demo --keep`` are commands that run as printed: by name when the
    PATH finds this one, else by the path of the running one (a nox virtualenv)."""
    here = os.path.dirname(sys.executable)
    for path, start in (
        (f"{here}{os.pathsep}{os.environ.get('PATH', '')}", ["agent-custody-memory"]),
        (os.defpath, [sys.executable, "-m", "agent_custody_state"]),
    ):
        _out, hints = _next_steps(path)
        assert len(hints) >= 4, hints
        folder = None
        try:
            for hint in hints:
                words = shlex.split(hint)
                assert words[: len(start)] == start, (hint, start)
                if "--ledger" in words:
                    folder = Path(words[words.index("--ledger") + 1]).parent
                ran = subprocess.run(
                    words,
                    capture_output=True,
                    text=True,
                    timeout=60,
                    env={**os.environ, "PATH": path},
                )
                assert ran.returncode == 0, (hint, ran.stderr)
        finally:
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)


def test_demo_prints_no_path_into_its_deleted_folder() -> None:
    done = run_cli("demo", "--color", "never", timeout=120)
    assert done.returncode == 0, done.stderr
    folder = re.search(r"ledger (\S+)/ledger\.\w+", done.stdout)
    assert folder is not None and not os.path.exists(folder.group(1))
    assert "certificate.json" not in done.stdout
    assert "the certificate (in the temporary folder): " in done.stdout


def test_stdio_startup_line_and_forget_key_warning(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    env = {**os.environ, "FK": "k3y"}
    quiet = subprocess.run(
        [*CLI, "serve", "--ledger", str(ledger), "--forget-key-env", "FK"],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert quiet.returncode == 0
    assert quiet.stderr == (
        f"agent-custody-memory: ledger {ledger} (jsonl, 0 events); serving "
        "stdio; trust: the spawning process is the gateway; calls without a "
        "receipt are refused\n"
    )
    assert quiet.stdout == ""
    loud = subprocess.run(
        [*CLI, "serve", "--ledger", str(ledger), "--allow-direct"],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = loud.stderr.splitlines()
    assert lines[0].endswith("direct calls admitted as claimed (quarantined)")
    assert lines[1].startswith("agent-custody-memory: warning: no forget key")


def test_stdio_startup_line_names_crypto_shred(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    done = subprocess.run(
        [*CLI, "serve", "--ledger", str(ledger), "--forget-mode", "crypto-shred"],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert f"; forget: crypto-shred (keys {ledger}.keys)" in done.stderr.splitlines()[0]
    assert (tmp_path / "l.jsonl.keys").exists()


def _serve(*args: str) -> str:
    done = subprocess.run(
        [*CLI, "serve", *args], input="", capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stderr.splitlines()[0]


def test_the_startup_line_warns_of_a_forget_mode_the_ledger_does_not_record(
    tmp_path: Path,
) -> None:
    """The mode recorded with the ledger (``modemark``) against the server's: a plain server on
    a crypto-shred ledger, and a crypto-shred server with another key store than the ledger's."""
    ledger, vault, other = tmp_path / "l.jsonl", tmp_path / "vault.keys", tmp_path / "other.keys"
    sealed = _serve(
        "--ledger", str(ledger), "--forget-mode", "crypto-shred", "--key-store", str(vault)
    )
    assert "warning" not in sealed
    plain = _serve("--ledger", str(ledger))
    assert (
        f"warning: the ledger is written in crypto-shred mode (keys {vault}) and this server is "
        "not: it will refuse to write values" in plain
    )
    split = _serve(
        "--ledger", str(ledger), "--forget-mode", "crypto-shred", "--key-store", str(other)
    )
    assert f"warning: the ledger records its keys in {vault}, this server uses {other}" in split


def test_serve_over_stdio_refuses_dev_null_as_stdin(tmp_path: Path) -> None:
    """cron, systemd and nohup start it with /dev/null on stdin, which no MCP client is (and
    the event loop cannot wait on): one line, exit 2, nothing left behind."""
    ledger = tmp_path / "l.jsonl"
    done = subprocess.run(
        [*CLI, "serve", "--ledger", str(ledger)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "error: serve over stdio needs its MCP client on stdin (a pipe); stdin is /dev/null: "
        "start it from an MCP client, or serve HTTP with --http\n"
    )
    assert list(tmp_path.iterdir()) == []
    requests = tmp_path / "requests.jsonl"  # a regular file still serves (then ends)
    requests.write_text("")
    with open(requests, encoding="utf-8") as stdin:
        done = subprocess.run(
            [*CLI, "serve", "--ledger", str(ledger)],
            stdin=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 0 and "serving stdio" in done.stderr, done.stderr


def test_serve_log_format_json_writes_only_json_to_stderr(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    done = subprocess.run(
        [*CLI, "serve", "--ledger", str(ledger), "--log-format", "json", "--token-env", "TK"],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TK": "t0ken"},  # short, and accepted: stdio uses no tokens
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    assert [(line["level"], line["logger"]) for line in lines] == [
        ("info", "serve"),
        ("info", "serve"),
        ("warning", "serve"),
    ]
    assert lines[0]["message"].startswith("note: bearer tokens apply to HTTP only")
    assert lines[1]["message"].startswith(f"ledger {ledger} (jsonl, 0 events); serving stdio")
    assert lines[2]["message"].startswith("no forget key (--forget-key-env)")


def test_http_without_tokens_says_how_to_admit_callers(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [*CLI, "serve", "--ledger", str(tmp_path / "l.jsonl"), "--http", "--port", "0"],
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stderr is not None
    try:
        line = proc.stderr.readline()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert line.rstrip().endswith(
        "trust: no tokens, every caller is direct; calls without a receipt are refused, so every "
        "call is refused: add --token-env NAME (a gateway's bearer token), or --allow-direct to "
        "accept direct callers quarantined"
    ), line

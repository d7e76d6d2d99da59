"""SIGTERM stops the server as cleanly as SIGINT (issue 11.6): containers and service managers
stop with SIGTERM. Calls already read are answered, the ledger is closed, the exit status is 0."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "agent_custody_state"]
META = {"agent-custody/receipt": "rcpt-1", "agent-custody/agent": "agent-1"}


def _request(rid: int, method: str, params: dict[str, object]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_stdio_answers_what_it_read_then_exits_0(tmp_path: Path, sig: signal.Signals) -> None:
    ledger = tmp_path / "l.jsonl"
    # Unbuffered: a buffered readline below could take the write's answer along with the
    # first line, and communicate() (which reads the pipes themselves) would never see it.
    proc = subprocess.Popen(
        [*CLI, "serve", "--ledger", str(ledger)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    assert proc.stdin is not None and proc.stdout is not None
    init = _request(
        0,
        "initialize",
        {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    )
    note = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    call = _request(
        1,
        "tools/call",
        {
            "name": "memory.write",
            "_meta": META,
            "arguments": {"subject": "s", "predicate": "p", "value": "v", "space": "org"},
        },
    )
    proc.stdin.write(init + b"\n" + note + b"\n" + call + b"\n")
    proc.stdin.flush()
    first = proc.stdout.readline()  # the initialize answer: the server is reading
    assert json.loads(first)["id"] == 0
    deadline = time.monotonic() + 30
    while b'"value":"v"' not in (ledger.read_bytes() if ledger.exists() else b""):
        assert time.monotonic() < deadline, "the write never reached the ledger"
        time.sleep(0.01)
    proc.send_signal(sig)  # stdin stays open: only the signal can end it
    out, err = proc.communicate(timeout=30)
    replies = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert proc.returncode == 0, err.decode()
    # The server's stderr goes with each failure: this test failed twice under heavy load
    # in earlier rounds without saying why.
    assert [r["id"] for r in replies] == [1], (replies, err.decode())
    assert not replies[0]["result"].get("isError"), (replies, err.decode())
    assert b'"value":"v"' in ledger.read_bytes()
    assert b"Traceback" not in err, err.decode()


def test_http_stops_on_sigterm_with_status_0(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [*CLI, "serve", "--ledger", str(tmp_path / "l.jsonl"), "--http", "--port", "0"],
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stderr is not None
    line = proc.stderr.readline().decode()
    assert "serving http://" in line, line
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err.decode()
    assert b"Traceback" not in err

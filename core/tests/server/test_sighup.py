"""SIGHUP (a closed terminal, a dropped ssh session) stops ``serve --http`` as cleanly as
SIGTERM: uvicorn catches only SIGTERM and SIGINT, and SIGHUP's default action killed the server
amid its calls, the ledger unclosed. A server started ignoring SIGHUP (``nohup``) keeps ignoring
it, over HTTP and over stdio: the operator asked that a closed terminal not stop it."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from servertest import CLI, INIT, start_http

from agent_custody_state import Ledger


def _ignore_sighup() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as nohup starts its command


def test_sighup_stops_an_http_server_cleanly(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    served = start_http("--ledger", str(ledger), "--allow-direct")
    try:
        served.proc.send_signal(signal.SIGHUP)
        assert served.proc.wait(30) == 0, served.lines
    finally:
        served.stop()
    assert not any("Traceback" in line for line in served.lines), served.lines
    with Ledger(ledger) as again:  # closed cleanly: opens with nothing to repair
        assert again.count() == 0


def test_an_http_server_started_under_nohup_ignores_sighup(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [*CLI, "serve", "--http", "--port", "0", "--ledger", str(tmp_path / "l.jsonl")],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ignore_sighup,
    )
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 30
        while "serving http://" not in proc.stderr.readline():
            assert time.monotonic() < deadline and proc.poll() is None
        proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)  # a handled SIGHUP stops it within this (the test above: ~0.1 s)
        assert proc.poll() is None, "a nohup'd server stopped on SIGHUP"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_stdio_server_started_under_nohup_ignores_sighup(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [*CLI, "serve", "--ledger", str(tmp_path / "l.jsonl")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
        preexec_fn=_ignore_sighup,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(json.dumps(INIT).encode() + b"\n")
        assert json.loads(proc.stdout.readline())["id"] == INIT["id"]  # serving, signals set
        proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)  # a handled SIGHUP has stopped the reading by then
        proc.stdin.write(b'{"jsonrpc":"2.0","id":"after","method":"ping"}\n')
        assert json.loads(proc.stdout.readline())["id"] == "after"  # still serving
        _, err = proc.communicate(timeout=30)  # end of input stops it
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.decode()

"""``shutdown_delay``: a SIGTERM keeps an HTTP server serving for a while, ``/readyz`` draining.

Before, on SIGTERM the listener closed within about 0.1 s: ``/readyz`` said ``draining`` only
in that window, later probes were refused, and a load balancer (or Kubernetes, which takes a
moment to remove a pod from a Service's endpoints) still sending new connections had them
refused; the only remedy was a ``preStop`` sleep. With ``--shutdown-delay N`` (``[server]
shutdown_delay``) a SIGTERM first serves on for N seconds, answering ``/readyz`` with 503
``draining``, then stops as before. A second signal ends the delay; SIGINT (Ctrl-C) alone stops
at once; 0 (the default) is the old behaviour; stdio ignores the setting.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from servertest import CLI, HEADERS, INIT, HttpServer, start_http

from agent_custody_state import Ledger
from agent_custody_state.cli import build_parser
from agent_custody_state.config import ConfigError, load_config
from agent_custody_state.server.drain import DrainingServer
from agent_custody_state.server.http import create_memory_http_server

DRAINING = (503, {"status": "not_ready", "reason": "draining"})


def base(server: HttpServer) -> str:
    return server.url.removesuffix("/mcp")


def write(server: HttpServer, value: str) -> dict[str, Any]:
    """A ``memory.write`` on a new connection and a new session; its result."""
    arguments = {"subject": "s", "predicate": "p", "value": value, "space": "org"}
    body = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "memory.write", "arguments": arguments},
    }
    with httpx.Client(timeout=10) as client:
        opened = client.post(server.url, json=INIT, headers=HEADERS)
        session = {**HEADERS, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        client.post(server.url, json=note, headers=session)
        answer = client.post(server.url, json=body, headers=session)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = json.loads(answer.text)["result"]
    return result


def probe(server: HttpServer, path: str) -> tuple[int, Any]:
    response = httpx.get(base(server) + path, timeout=10)
    return response.status_code, response.json()


def until_draining(server: HttpServer, timeout: float = 10) -> None:
    """Wait for the signal to be taken (``/readyz`` draining): its delivery is asynchronous."""
    deadline = time.monotonic() + timeout
    while probe(server, "/readyz") != DRAINING:
        assert time.monotonic() < deadline and server.proc.poll() is None, server.lines
        time.sleep(0.02)


def serve(tmp_path: Path, delay: str) -> HttpServer:
    return start_http(
        "--ledger", str(tmp_path / "l.jsonl"), "--allow-direct", "--shutdown-delay", delay
    )


def test_during_the_delay_the_server_serves_and_says_draining(tmp_path: Path) -> None:
    served = serve(tmp_path, "2")
    try:
        assert write(served, "before")["isError"] is False
        assert probe(served, "/readyz") == (200, {"status": "ready"})
        signalled = time.monotonic()
        served.proc.send_signal(signal.SIGTERM)
        until_draining(served)
        # New connections are still accepted: probes, and an MCP call on a new session.
        assert probe(served, "/healthz") == (200, {"status": "ok"})
        assert write(served, "during")["isError"] is False, served.lines
        assert served.proc.wait(30) == 0, served.lines
        assert time.monotonic() - signalled >= 1.9  # the delay was kept
    finally:
        served.stop()
    assert b'"value":"during"' in (tmp_path / "l.jsonl").read_bytes()
    assert any("shutdown_delay" in line for line in served.lines), served.lines
    assert not any("Traceback" in line for line in served.lines), served.lines


@pytest.mark.parametrize("second", [signal.SIGTERM, signal.SIGINT])
def test_a_second_signal_during_the_delay_stops_at_once(
    tmp_path: Path, second: signal.Signals
) -> None:
    served = serve(tmp_path, "60")
    try:
        served.proc.send_signal(signal.SIGTERM)
        until_draining(served)
        signalled = time.monotonic()
        served.proc.send_signal(second)
        assert served.proc.wait(20) == 0, served.lines
        assert time.monotonic() - signalled < 10
    finally:
        served.stop()
    assert not any("Traceback" in line for line in served.lines), served.lines


def test_sigint_alone_stops_at_once(tmp_path: Path) -> None:
    """Ctrl-C is someone at a terminal who wants the server stopped: no delay."""
    served = serve(tmp_path, "60")
    try:
        signalled = time.monotonic()
        served.proc.send_signal(signal.SIGINT)
        assert served.proc.wait(20) == 0, served.lines
        assert time.monotonic() - signalled < 10
    finally:
        served.stop()


def test_stdio_ignores_the_delay(tmp_path: Path) -> None:
    """Over stdio no load balancer routes to the server: a SIGTERM stops it as before. The
    setting comes from the configuration (one file often serves both transports); the flag
    with stdio is a usage error (``test_review19_cli``)."""
    proc = subprocess.Popen(
        [*CLI, "serve", "--ledger", str(tmp_path / "l.jsonl")],
        env={**os.environ, "AGENT_CUSTODY_SERVER__SHUTDOWN_DELAY": "60"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps({**INIT, "id": 0}).encode() + b"\n")
    assert json.loads(proc.stdout.readline())["id"] == 0  # it is serving
    signalled = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err.decode()
    assert time.monotonic() - signalled < 10


# -- in process: the signals' order, the bounds ------------------------------------------------


def draining_server(delay: float) -> DrainingServer:
    return DrainingServer(uvicorn.Config(app="unused:app"), lambda: 0, delay=delay)


def test_signals_during_a_delay_in_order() -> None:
    server = draining_server(5)
    server.handle_exit(signal.SIGTERM, None)
    assert server.stopping and not server.should_exit  # serving on, /readyz draining
    server.handle_exit(signal.SIGINT, None)
    assert server.should_exit and not server.force_exit  # the delay ends: the usual drain
    server.handle_exit(signal.SIGINT, None)
    assert server.force_exit  # a further Ctrl-C cuts the drain short, as uvicorn's does


def test_a_sigterm_the_command_caught_drains_as_uvicorns_would() -> None:
    """The server is announced before uvicorn puts its signal handlers in place; a SIGTERM in
    between reached the command's own handler, which stopped the server at once, the delay
    skipped (seen as a refused ``/readyz`` probe right after start on a loaded machine). It is
    now handed to the server as uvicorn's handler would take it."""
    server = create_memory_http_server(Ledger("memory:"), port=0, shutdown_delay=5)
    server._uvicorn = draining_server(5)
    server.request_stop(signal.SIGTERM)
    assert server._uvicorn.stopping and not server._uvicorn.should_exit  # draining
    assert server.readiness is not None and server.readiness.draining()
    server.request_stop(signal.SIGTERM)  # a second one ends the delay
    assert server._uvicorn.should_exit and not server._uvicorn.force_exit
    server.request_stop()  # close(), a test: at once
    assert server._uvicorn.should_exit


@pytest.mark.parametrize(("delay", "sig"), [(0, signal.SIGTERM), (5, signal.SIGINT)])
def test_no_delay_stops_at_once(delay: float, sig: signal.Signals) -> None:
    server = draining_server(delay)
    server.handle_exit(sig, None)
    assert server.should_exit and server.stopping and server.delay_ends is None


@pytest.mark.parametrize("given", ["-1", "301", "nan", "inf", "soon"])
def test_a_flag_out_of_bounds_is_a_usage_error(
    given: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(["serve", "--shutdown-delay", given])
    assert stopped.value.code == 2
    assert "argument --shutdown-delay: " in capsys.readouterr().err


@pytest.mark.parametrize("given", [-1, 301, float("nan"), float("inf")])
def test_a_config_value_out_of_bounds_is_refused_by_name(given: float) -> None:
    with pytest.raises(ConfigError, match=r"server\.shutdown_delay: must be seconds from 0"):
        load_config(None, server={"shutdown_delay": given})


def test_the_default_is_no_delay() -> None:
    assert load_config(None).server.shutdown_delay == 0
    assert draining_server(0).delay == 0
    with pytest.raises(ValueError, match="shutdown_delay"):
        draining_server(-1)

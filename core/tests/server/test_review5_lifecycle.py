"""Review 5: the server's life cycle: a stop with calls in flight, a second signal, a vanished
stdio client, a refused start, the log lines of the HTTP transport."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
from servertest import CLI, HEADERS, INIT, start_http

from agent_custody_state import Ledger, serve_memory_http
from agent_custody_state.ledger.model import Fact
from agent_custody_state.stores.inprocess import InProcessStore

META = {"agent-custody/receipt": "rcpt-1", "agent-custody/agent": "agent-1"}


class SlowStore(InProcessStore):
    """Takes ``delay`` seconds over every put, and says when one has begun."""

    def __init__(self, delay: float) -> None:
        super().__init__("slow")
        self.delay = delay
        self.putting = threading.Event()

    async def put(self, fact: Fact) -> str:
        self.putting.set()
        await anyio.sleep(self.delay)
        return await super().put(fact)


def _write(url: str, answers: list[Any]) -> None:
    with httpx.Client(timeout=30) as client:
        opened = client.post(url, json=INIT, headers=HEADERS)
        session = {**HEADERS, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
        client.post(
            url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session
        )
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {
                "name": "memory.write",
                "_meta": META,
                "arguments": {"subject": "s", "predicate": "p", "value": "v", "space": "org"},
            },
        }
        try:
            answers.append(client.post(url, json=call, headers=session))
        except httpx.HTTPError as exc:
            answers.append(exc)


def test_a_stop_lets_a_call_in_flight_be_answered(tmp_path: Path) -> None:
    """A stop (SIGTERM, ``close()``) while a write takes longer than uvicorn's own 3 s grace:
    the write was completed in the ledger but its answer was cut off (the caller, told
    nothing, retries: a second copy), with a traceback in the log. The call is answered."""
    ledger = Ledger(tmp_path / "l.jsonl")
    store = SlowStore(4.5)
    server = serve_memory_http(ledger, port=0, stores=[store], require_gateway=False)
    answers: list[Any] = []
    caller = threading.Thread(target=_write, args=(server.url, answers))
    try:
        caller.start()
        assert store.putting.wait(20)
        started = time.monotonic()
        server.close()
        caller.join(30)
        assert time.monotonic() - started < 20
    finally:
        server.close()
        ledger.close()
    assert len(answers) == 1 and isinstance(answers[0], httpx.Response), answers
    answer = answers[0]
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    assert not result["isError"], result
    fact = json.loads(result["content"][0]["text"])["fact"]
    assert fact["value"] == "v"
    with Ledger(tmp_path / "l.jsonl") as reopened:
        assert len(reopened.history(fact["factId"])) == 1


def test_json_log_holds_uvicorn_records_too(tmp_path: Path) -> None:
    """``--log-format json`` promises one object per line; uvicorn's own records (a malformed
    request from anyone who can connect, a stop's cancellations) came in uvicorn's text."""
    server = start_http(
        "--ledger", str(tmp_path / "l.jsonl"), "--allow-direct", "--log-format", "json"
    )
    try:
        host, port = server.url.split("//")[1].split("/")[0].rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(b"NOT HTTP \x00\x01\r\n\r\n")
            sock.recv(1024)  # the server's 400, or its close
        deadline = time.monotonic() + 10
        while not any("Invalid HTTP" in line for line in server.lines):
            assert time.monotonic() < deadline, server.lines
            time.sleep(0.05)
    finally:
        server.stop()
    for line in server.lines:
        if line.strip():
            assert isinstance(json.loads(line), dict), line


def test_a_stop_does_not_cut_a_2026_write_between_its_stores(tmp_path: Path) -> None:
    """On the 2026-07-28 protocol a tool call runs in the HTTP request's own task, which
    uvicorn cancels natively 3 s into a stop; a native cancel goes through the flow's anyio
    shield: the write stopped after the first store's put, before the ledger, leaving a fact
    in that store that no ledger records (and no forget can reach). Both or neither now."""
    from mcp import Client

    ledger = Ledger(tmp_path / "l.jsonl")
    fast, slow = InProcessStore("fast"), SlowStore(4.5)
    server = serve_memory_http(ledger, port=0, stores=[fast, slow], require_gateway=False)
    outcome: list[Any] = []

    async def call() -> None:
        async with Client(server.url) as client:
            assert client.protocol_version == "2026-07-28"
            arguments = {"subject": "s", "predicate": "p", "value": "v", "space": "org"}
            meta: Any = META
            outcome.append(await client.call_tool("memory.write", arguments, meta=meta))

    def run() -> None:
        try:
            anyio.run(call)
        except BaseException as exc:  # the stop may end the client's connection
            outcome.append(exc)

    caller = threading.Thread(target=run)
    try:
        caller.start()
        assert slow.putting.wait(20)
        server.close()
        caller.join(30)
    finally:
        server.close()
        ledger.close()
    held = [record["metadata"]["factId"] for record in fast.vendor.rows.values()]
    with Ledger(tmp_path / "l.jsonl") as reopened:
        recorded = [fact_id for fact_id in held if reopened.get(fact_id) is not None]
    assert held == recorded, (held, outcome)
    assert len(held) == 1, outcome  # the write was let finish, not dropped


def test_a_refused_start_leaves_no_key_store(tmp_path: Path) -> None:
    """A start refused after the ledger was opened (stdin is /dev/null) removes what opening
    created: the ledger's own files were, a key store given elsewhere (``--key-store``) was
    left behind, empty."""
    done = subprocess.run(
        [
            *CLI,
            "serve",
            "--ledger",
            str(tmp_path / "l.jsonl"),
            "--forget-mode",
            "crypto-shred",
            "--key-store",
            str(tmp_path / "keys.jsonl"),
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: serve over stdio needs"), done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


SLOW_STDIO_STORE = """
import os, pathlib, anyio
from agent_custody_state.stores import inprocess

_put = inprocess.InProcessStore.put

async def put(self, fact):
    if self.name == "slow":
        pathlib.Path(os.environ["SLOW_MARK"]).write_text("putting")
        await anyio.sleep(3)
    return await _put(self, fact)

inprocess.InProcessStore.put = put
"""


def test_a_second_stop_signal_over_stdio_does_not_cut_the_write(tmp_path: Path) -> None:
    """Over stdio the first SIGTERM ends the input and lets the calls read finish; the signal
    receiver then ended, leaving SIGTERM at its default action (SIGINT raising
    KeyboardInterrupt): a second signal killed the server mid-write, after a store took the
    fact and before the ledger recorded it. Later signals are now absorbed the same way."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(SLOW_STDIO_STORE)
    (tmp_path / "m.toml").write_text(
        'ledger = "l.jsonl"\n[[stores]]\nname = "fast"\ntype = "memory"\n'
        '[[stores]]\nname = "slow"\ntype = "memory"\n'
    )
    mark = tmp_path / "putting"
    path = os.pathsep.join(filter(None, [str(tmp_path / "site"), os.environ.get("PYTHONPATH")]))
    proc = subprocess.Popen(
        [*CLI, "serve", "--config", str(tmp_path / "m.toml")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,  # readline below must not take the next answer along (communicate reads it)
        env={**os.environ, "PYTHONPATH": path, "SLOW_MARK": str(mark)},
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        init = INIT["params"]
        call = {
            "name": "memory.write",
            "_meta": META,
            "arguments": {"subject": "s", "predicate": "p", "value": "v", "space": "org"},
        }
        for message in (
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call},
        ):
            proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 0
        deadline = time.monotonic() + 30
        while not mark.exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)  # the first stop is under way
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err.decode()
    replies = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert [r["id"] for r in replies] == [1], replies
    assert not replies[0]["result"]["isError"], replies
    assert b'"value":"v"' in (tmp_path / "l.jsonl").read_bytes()


def test_a_stop_ends_listen_streams_as_the_protocol_says(tmp_path: Path, caplog: Any) -> None:
    """A 2026-07-28 ``subscriptions/listen`` stream is a POST that stays open: a stop waited
    uvicorn's 3 s for it, then cancelled it, logging ``Exception in ASGI application`` with a
    traceback, and the client saw its stream dropped. It is now ended the graceful way (its
    final result sent), and the stop is clean."""
    from mcp import Client

    ledger = Ledger(tmp_path / "l.jsonl")
    server = serve_memory_http(ledger, port=0, require_gateway=False)
    listening = threading.Event()
    outcome: list[Any] = []

    async def listen() -> None:
        async with Client(server.url) as client:
            async with client.listen(resource_subscriptions=["memory://ledger/head"]) as sub:
                listening.set()
                async for _ in sub:
                    pass
                outcome.append("ended")

    def run() -> None:
        try:
            anyio.run(listen)
        except BaseException as exc:
            outcome.append(exc)
        listening.set()

    caller = threading.Thread(target=run)
    try:
        caller.start()
        assert listening.wait(20)
        time.sleep(0.3)  # the acknowledgement is out: the stream is open
        server.close()
        caller.join(20)
    finally:
        server.close()
        ledger.close()
    assert outcome == ["ended"], outcome
    assert "Exception in ASGI application" not in caplog.text, caplog.text


def test_a_stdio_client_that_vanishes_ends_the_server_cleanly(tmp_path: Path) -> None:
    """The client goes away (its end of our stdout closed) with requests still coming in:
    writing the next answer failed with EPIPE and ended the server with an ExceptionGroup
    traceback and exit 1. The server now stops reading, finishes what it read (each write
    whole, the answers going nowhere), closes the ledger and exits 0."""
    proc = subprocess.Popen(
        [*CLI, "serve", "--ledger", str(tmp_path / "l.jsonl")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        init = INIT["params"]
        proc.stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}).encode()
            + b'\n{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
        )
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 0
        proc.stdout.close()  # the client is gone
        for n in range(1, 20):
            call = {
                "name": "memory.write",
                "_meta": META,
                "arguments": {"subject": "s", "predicate": "p", "value": n, "space": "org"},
            }
            message = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": call}
            proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.close()
        err = proc.stderr.read() if proc.stderr is not None else b""
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert b"Traceback" not in err, err.decode()
    assert proc.returncode == 0, err.decode()
    verified = subprocess.run(
        [*CLI, "verify", "--ledger", str(tmp_path / "l.jsonl")], capture_output=True, text=True
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr

"""The stdio server on a hostile or broken pipe (nineteenth review): raw bytes on its stdin,
its stdout read as the gateway reads it, and the signals a terminal or a service manager sends.

Every case a client could use to end the server, to get something other than its own answer
back, or to hold up a stop, is here; the SDK client drives only the control cases.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage
from servertest import CLI, INIT, run_cli

from agent_custody_state import Ledger
from agent_custody_state.server import stdio
from agent_custody_state.server.stdio import stdio_transport

META = {"agent-custody/receipt": "rcpt-1", "agent-custody/agent": "agent-1"}
HANDSHAKE = (
    json.dumps(INIT).encode() + b'\n{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
)
PING = b'{"jsonrpc":"2.0","id":"last","method":"ping"}\n'


def _serve_lines(tmp_path: Path, data: bytes) -> tuple[list[dict[str, Any]], int, str]:
    """Everything the server wrote for ``data`` (after the handshake), as parsed lines; its exit
    status and standard error. A line on stdout that is not JSON fails the test."""
    done = subprocess.run(
        [*CLI, "serve", "--ledger", str(tmp_path / "l.jsonl"), "--max-request-bytes", "3000"],
        input=HANDSHAKE + data,
        capture_output=True,
        timeout=60,
    )
    replies = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return replies[1:], done.returncode, done.stderr.decode()


@pytest.mark.parametrize(
    "line",
    [
        # An oversized message whose id is a number Python will not read.
        b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}',
        # An oversized message whose id holds a bad escape.
        b'{"jsonrpc":"2.0","id":"\\q","method":"ping","params":{"x":"' + b"a" * 4000 + b'"}}',
        # An oversized message whose id is a lone surrogate.
        b'{"jsonrpc":"2.0","id":"\\udc00","method":"ping","params":{"x":"' + b"a" * 4000 + b'"}}',
        # A message nested too deeply for Python's parser, its id (found at its end) a lone
        # surrogate.
        b'{"jsonrpc":"2.0","method":"ping","params":'
        + b"[" * 1200
        + b"]" * 1200
        + b',"id":"\\ud800"}',
        # A request whose id is a lone surrogate: the answer could not be written.
        b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}',
    ],
    ids=[
        "huge-number-id",
        "bad-escape-id",
        "surrogate-id-oversized",
        "deep-surrogate-id",
        "surrogate",
    ],
)
def test_an_id_no_answer_can_carry_is_answered_null_and_serving_goes_on(
    tmp_path: Path, line: bytes
) -> None:
    replies, status, err = _serve_lines(tmp_path, line + b"\n" + PING)
    assert status == 0, err
    assert "Traceback" not in err, err
    assert [r["id"] for r in replies] == [None, "last"], replies
    assert replies[0]["error"]["code"] in (types.INVALID_REQUEST, types.PARSE_ERROR)
    assert replies[1]["result"] == {}


def test_an_answer_the_client_sends_is_not_echoed_back(tmp_path: Path) -> None:
    answers = (
        b'{"jsonrpc":"2.0","id":11,"error":{"code":-32601,"message":"no sampling here"}}\n'
        b'{"jsonrpc":"2.0","id":12,"result":{}}\n'
    )
    replies, status, err = _serve_lines(tmp_path, answers + PING)
    assert status == 0, err
    # Before: the error came back on stdout as if the server had answered request 11.
    assert replies == [{"jsonrpc": "2.0", "id": "last", "result": {}}]


def _write_call(request_id: int) -> bytes:
    params = {
        "name": "memory.write",
        "_meta": META,
        "arguments": {"subject": "s", "predicate": "p", "value": "v", "space": "org"},
    }
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    return json.dumps(message).encode() + b"\n"


def test_sighup_stops_the_server_as_sigterm_does(tmp_path: Path) -> None:
    """A closed terminal or a dropped ssh session sends SIGHUP: the calls read are answered,
    the ledger is closed, the status is 0 (before: killed at once, amid the write)."""
    ledger = tmp_path / "l.jsonl"
    proc = subprocess.Popen(
        [*CLI, "serve", "--ledger", str(ledger)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(HANDSHAKE + _write_call(2))
        assert json.loads(proc.stdout.readline())["id"] == INIT["id"]
        answer = json.loads(proc.stdout.readline())  # the first write's: the server listens
        assert answer["id"] == 2 and not answer["result"].get("isError"), answer
        proc.stdin.write(_write_call(3))
        deadline = time.monotonic() + 30
        while ledger.read_bytes().count(b'"value":"v"') < 2:  # the second write is in
            assert time.monotonic() < deadline, "the second write never reached the ledger"
            time.sleep(0.01)
        proc.send_signal(signal.SIGHUP)  # stdin stays open: only the signal can end it
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, (proc.returncode, err.decode())
    replies = [json.loads(line) for line in out.splitlines()]
    assert [r["id"] for r in replies] == [3], replies
    assert not replies[0]["result"].get("isError"), replies
    assert ledger.read_bytes().count(b'"value":"v"') == 2
    assert b"Traceback" not in err, err.decode()


@pytest.mark.anyio
async def test_a_stop_waits_for_no_request_it_never_handed_over() -> None:
    """A stop that catches a request on its way to the server (the server busy, not taking it)
    owes it no answer: the input ends at once. Before, it was counted as owed and every such stop
    waited the whole 10 s drain (seen with a gateway gone while the server was busy)."""
    to_server, from_client = os.pipe()
    to_client, from_server = os.pipe()
    note = types.JSONRPCNotification(jsonrpc="2.0", method="notifications/message", params={})
    try:
        with anyio.fail_after(5):
            async with stdio_transport(in_fd=to_server, out_fd=from_server) as (read, write):
                os.write(from_client, b'{"jsonrpc":"2.0","id":7,"method":"ping"}\n')
                # The reader has the request and waits for the server to take it.
                await anyio.wait_all_tasks_blocked()
                os.close(to_client)  # the gateway is gone: the next write fails, a stop
                await write.send(SessionMessage(note))
                await anyio.wait_all_tasks_blocked()
                taken = [message async for message in read]
    finally:
        for fd in (to_server, from_client, from_server):
            os.close(fd)
    assert taken == []


@pytest.mark.anyio
async def test_an_answer_that_cannot_be_written_becomes_an_error_not_a_crash() -> None:
    """A string that is not valid Unicode in an answer (no UTF-8 for it) ended the writer, and the
    server with it; now that request gets an internal error and the next answer goes out."""
    to_server, from_client = os.pipe()
    to_client, from_server = os.pipe()
    try:
        with anyio.fail_after(5):
            async with stdio_transport(in_fd=to_server, out_fd=from_server) as (_read, write):
                bad = types.JSONRPCResponse(jsonrpc="2.0", id=5, result={"text": "\ud800"})
                good = types.JSONRPCResponse(jsonrpc="2.0", id=6, result={"text": "ok"})
                await write.send(SessionMessage(bad))
                await write.send(SessionMessage(good))
                got = b""
                while got.count(b"\n") < 2:
                    await anyio.wait_readable(to_client)
                    got += os.read(to_client, 1 << 16)
                os.close(from_client)  # end of input: the transport closes
    finally:
        for fd in (to_server, to_client, from_server):
            os.close(fd)
    first, second = (json.loads(line) for line in got.splitlines())
    assert first["id"] == 5 and first["error"]["code"] == types.INTERNAL_ERROR, first
    assert second == {"jsonrpc": "2.0", "id": 6, "result": {"text": "ok"}}


@pytest.mark.anyio
async def test_a_gateway_that_stops_reading_stops_the_reading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Requests the server holds are bounded (``MAX_OWED``): past it nothing more is read until
    an answer is written. Before, a gateway that went on writing requests while it read no
    answer grew the server's memory by about 200 KB a request (1 GB per 5,000 ``tools/list``)."""
    monkeypatch.setattr(stdio, "MAX_OWED", 3, raising=False)
    to_server, from_client = os.pipe()
    to_client, from_server = os.pipe()
    taken: list[Any] = []
    try:
        with anyio.fail_after(5):
            async with stdio_transport(in_fd=to_server, out_fd=from_server) as (read, write):

                async def take() -> None:
                    async for message in read:
                        taken.append(message.message)

                async with anyio.create_task_group() as tg:
                    tg.start_soon(take)
                    os.write(
                        from_client,
                        b"".join(
                            b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % n for n in range(6)
                        ),
                    )
                    await anyio.wait_all_tasks_blocked()
                    assert [m.id for m in taken] == [0, 1, 2]
                    answer = types.JSONRPCResponse(jsonrpc="2.0", id=0, result={})
                    await write.send(SessionMessage(answer))
                    await anyio.wait_all_tasks_blocked()
                    assert [m.id for m in taken] == [0, 1, 2, 3]  # one answered, one more in
                    os.close(from_client)  # answered one by one, the rest come in
                    for n in range(1, 6):
                        await anyio.wait_all_tasks_blocked()
                        assert n in [m.id for m in taken]
                        await write.send(SessionMessage(answer.model_copy(update={"id": n})))
    finally:
        for fd in (to_server, to_client, from_server):
            os.close(fd)
    assert [m.id for m in taken] == list(range(6))


def test_end_of_input_amid_a_certified_forget_lands_it_whole(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    """Held up (control): stdin closed right behind a ``memory.forget`` with a certificate, the
    forget is answered, its certificate kept and verified against the ledger."""
    ledger, folder = tmp_path / "l.jsonl", tmp_path / "certs"
    with Ledger(ledger) as book:
        fact = book.assert_fact(
            subject="s", predicate="p", value="gone@example.org", space="org", actor="a"
        ).fact.fact_id
    params = {
        "name": "memory.forget",
        "_meta": META,
        "arguments": {"factId": fact, "reason": "erasure request", "certificate": True},
    }
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}
    done = subprocess.run(
        [
            *CLI,
            "serve",
            "--ledger",
            str(ledger),
            "--key",
            str(keys[0]),
            "--certificates",
            str(folder),
        ],
        input=HANDSHAKE + json.dumps(call).encode() + b"\n",
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["id"] for r in replies] == [INIT["id"], 2], replies
    assert not replies[1]["result"].get("isError"), replies[1]
    [kept] = list(folder.glob("*.json"))
    checked = run_cli(
        "certificate", "verify", str(kept), "--key", str(keys[1]), "--ledger", str(ledger)
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert b"gone@example.org" not in ledger.read_bytes()

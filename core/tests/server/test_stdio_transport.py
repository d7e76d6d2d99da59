"""The stdio transport: size limit with a JSON-RPC error, garbage answered, serving goes on."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from servertest import CLI, unique

from agent_custody_state.server.stdio import LineFramer, Oversized
from agent_custody_state_conformance.gateway import GatewayClient

WRITE = {"subject": "acct:1", "predicate": "plan", "space": "org"}


@pytest.mark.anyio
async def test_oversized_message_gets_an_error_and_serving_continues(tmp_path: Path) -> None:
    async with GatewayClient.stdio(
        "serve", "--ledger", str(tmp_path / "l.jsonl"), "--max-request-bytes", "4000"
    ) as gw:
        with pytest.raises(MCPError) as caught:
            await gw.call("memory.write", {**WRITE, "value": "x" * 10_000})
        assert "message too large" in str(caught.value)
        assert "the limit is 4000 bytes" in str(caught.value)
        result = await gw.call("memory.write", {**WRITE, "subject": unique(), "value": "ok"})
        assert not result.is_error
        with pytest.raises(MCPError):
            await gw.call("memory.write", {**WRITE, "value": "y" * 1_000_000})
        assert not (await gw.call("memory.read", {})).is_error
    assert b"x" * 100 not in (tmp_path / "l.jsonl").read_bytes()


def _exchange(tmp_path: Path, lines: list[bytes], through: str = "pipe") -> list[dict[str, Any]]:
    """Send ``lines`` after the handshake; stdin and stdout are pipes, or regular files (which
    the transport cannot poll, so it reads and writes them from threads)."""
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    data = (
        json.dumps(init).encode()
        + b"\n"
        + b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
    )
    data += b"".join(line + b"\n" for line in lines)
    command = [*CLI, "serve", "--ledger", str(tmp_path / "raw.jsonl")]
    command += ["--max-request-bytes", "3000"]
    if through == "pipe":
        done = subprocess.run(command, input=data, capture_output=True, timeout=60)
        return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    (tmp_path / "in.jsonl").write_bytes(data)
    with open(tmp_path / "in.jsonl", "rb") as stdin, open(tmp_path / "out.jsonl", "wb") as out:
        subprocess.run(command, stdin=stdin, stdout=out, stderr=subprocess.DEVNULL, timeout=60)
    output = (tmp_path / "out.jsonl").read_bytes()
    return [json.loads(line) for line in output.splitlines() if line.strip()]


def test_raw_protocol_errors_keep_ids_where_known(tmp_path: Path) -> None:
    ping = b'{"jsonrpc":"2.0","id":%d,"method":"ping"}'
    head_id = (
        b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"x":"' + b"a" * 5000 + b'"}}'
    )
    tail_id = (
        b'{"method":"tools/call","params":{"x":"' + b"b" * 5000 + b'"},"jsonrpc":"2.0","id":"t-8"}'
    )
    nested = (
        b'{"method":"x","params":{"id":9,"x":"' + b"c" * 5000 + b'"},"jsonrpc":"2.0","id":null}'
    )
    replies = _exchange(
        tmp_path,
        [
            ping % 1,
            b"not json",
            head_id,
            tail_id,
            nested,
            b'{"jsonrpc":"2.0","id":5,"nomethod":1}',
            ping % 2,
        ],
    )
    by_id: dict[Any, list[dict[str, Any]]] = {}
    for reply in replies:
        by_id.setdefault(reply.get("id"), []).append(reply)
    assert "result" in by_id[1][0] and "result" in by_id[2][0]
    assert "too large" in by_id[7][0]["error"]["message"]
    assert "too large" in by_id["t-8"][0]["error"]["message"]
    nulls = [r["error"]["message"] for r in by_id[None]]
    assert any(m.startswith("parse error") for m in nulls)
    assert any("too large" in m for m in nulls)  # nested id is not the request's
    assert by_id[5][0]["error"]["code"] == -32600
    assert 9 not in by_id


def test_deeply_nested_message_is_refused_and_serving_continues(tmp_path: Path) -> None:
    """A line nested 50,000 deep (under the size limit) used to raise RecursionError in the
    parse-error path and end the server; it gets a parse error and the next call an answer."""
    ping = b'{"jsonrpc":"2.0","id":%d,"method":"ping"}'
    deep = (
        b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":'
        + b"[" * 50_000
        + b"]" * 50_000
        + b"}"
    )
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    data = json.dumps(init).encode() + b"\n" + b"\n".join([ping % 1, deep, ping % 2]) + b"\n"
    done = subprocess.run(
        [*CLI, "serve", "--ledger", str(tmp_path / "deep.jsonl")],
        input=data,
        capture_output=True,
        timeout=60,
        env=os.environ.copy(),
    )
    replies = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    # Each answered once, the deep one by its id (answers may come in any order: the parse
    # error is written by the reader while the server answers the ping).
    assert sorted(r.get("id") for r in replies) == [0, 1, 2, 3]
    deep_reply = next(r for r in replies if r.get("id") == 3)
    assert deep_reply["error"]["message"] == "parse error: the message is nested too deeply"
    assert b"Traceback" not in done.stderr


@pytest.mark.parametrize("through", ["pipe", "file"])
def test_requests_read_before_end_of_input_are_answered(tmp_path: Path, through: str) -> None:
    calls = [
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 100 + i,
                "method": "tools/call",
                "params": {
                    "name": "memory.write",
                    "_meta": {"agent-custody/receipt": f"r{i}", "agent-custody/agent": "a"},
                    "arguments": {"subject": f"s{i}", "predicate": "p", "value": i, "space": "org"},
                },
            }
        ).encode()
        for i in range(20)
    ]
    replies = _exchange(tmp_path, calls, through)
    answered = {r["id"]: r for r in replies if isinstance(r.get("id"), int) and r["id"] >= 100}
    assert sorted(answered) == list(range(100, 120))
    assert not any(r["result"].get("isError") for r in answered.values())
    lines = (tmp_path / "raw.jsonl").read_text().splitlines()
    assert len(lines) == 20


@pytest.mark.anyio
async def test_an_answer_larger_than_a_pipe_buffer_arrives_whole(tmp_path: Path) -> None:
    # The transport writes PIPE_BUF bytes at a time once stdout is writable: a read of many
    # facts (some 200 KB of JSON) must still arrive as one message, unmangled.
    async with GatewayClient.stdio("serve", "--ledger", str(tmp_path / "l.jsonl")) as gw:
        for i in range(100):
            args = {"subject": "big", "predicate": f"p{i}", "value": "v" * 2000, "space": "org"}
            assert not (await gw.call("memory.write", args)).is_error
        read = await gw.call("memory.read", {"subject": "big"})
    facts = json.loads(read.text)["facts"]
    assert sorted(f["predicate"] for f in facts) == sorted(f"p{i}" for i in range(100))
    assert all(f["value"] == "v" * 2000 for f in facts)


def test_line_framer_splits_and_drops() -> None:
    framer = LineFramer(10)
    assert framer.feed(b"abc\nde") == [b"abc"]
    assert framer.feed(b"f\r\n\n") == [b"def"]
    out = framer.feed(b"0123456789AB")
    assert out == []
    out = framer.feed(b"CD\nok\n")
    assert isinstance(out[0], Oversized) and out[0].size == 14 and out[1] == b"ok"
    exact = framer.feed(b"0123456789\n")
    assert exact == [b"0123456789"]


@pytest.mark.anyio
async def test_messages_the_sdk_cannot_parse_are_answered_by_id_with_the_reason(
    tmp_path: Path,
) -> None:
    """An integer of more than 4,300 digits anywhere, or nesting past the SDK parser's limit:
    the official client gets an error for its call (not a timeout) saying what to change."""
    async with GatewayClient.stdio("serve", "--ledger", str(tmp_path / "l.jsonl")) as gw:
        with anyio.fail_after(20):
            with pytest.raises(MCPError) as caught:
                await gw.call("memory.read", {"note": 10**4300})
            assert "more than 4300 digits; send it as a string" in str(caught.value)
            deep: Any = []
            for _ in range(220):
                deep = [deep]
            with pytest.raises(MCPError) as caught:
                await gw.call("memory.write", {**WRITE, "value": deep})
            assert "nested too deeply" in str(caught.value)
        assert not (await gw.call("memory.read", {})).is_error


def test_a_lone_surrogate_is_named_with_the_request_id(tmp_path: Path) -> None:
    # The official Python client cannot send one; a JavaScript client can ("\ud800").
    call = (
        b'{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"memory.write",'
        b'"arguments":{"subject":"a\\ud800b","predicate":"p","value":1,"space":"org"}}}'
    )
    [reply] = [r for r in _exchange(tmp_path, [call]) if r.get("id") == 41]
    assert reply["error"]["message"] == (
        "invalid JSON-RPC message: params.arguments.subject: lone surrogate, pass valid Unicode"
    )


def test_nan_confidence_is_an_invalid_argument(tmp_path: Path) -> None:
    # NaN compares false with every bound; the Python client sends it as null, others as NaN.
    call = (
        b'{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"memory.write",'
        b'"_meta":{"agent-custody/receipt":"r","agent-custody/agent":"a"},"arguments":'
        b'{"subject":"s","predicate":"p","value":1,"space":"org","confidence":NaN}}}'
    )
    [reply] = [r for r in _exchange(tmp_path, [call]) if r.get("id") == 42]
    assert reply["result"]["isError"] is True
    assert reply["result"]["content"][0]["text"] == (
        "invalid arguments: confidence: must be a finite number, got nan"
    )
    assert not (tmp_path / "raw.jsonl").exists() or not (tmp_path / "raw.jsonl").read_bytes()

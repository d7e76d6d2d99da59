"""Streamable HTTP: tokens and roles, Host/Origin, body limit, paths, binding rules."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from mcp.shared.exceptions import MCPError
from servertest import DIRECT_TOKEN, GATEWAY_TOKEN, HttpServer, start_http, unique

from agent_custody_state_conformance.gateway import GatewayClient

pytestmark = pytest.mark.anyio

WRITE = {"subject": "acct:1", "predicate": "plan", "value": "pro", "space": "org"}


@pytest.fixture(scope="module")
def open_server(module_dir: Path):  # type: ignore[no-untyped-def]
    """--allow-direct, a small body limit."""
    server = start_http(
        "--ledger",
        str(module_dir / "open.jsonl"),
        "--token-env",
        "MEMORY_TOKEN",
        "--direct-token-env",
        "AGENT_TOKEN",
        "--allow-direct",
        "--max-request-bytes",
        "20000",
    )
    yield server
    server.stop()


async def test_gateway_token_writes_attested(http_server: HttpServer) -> None:
    async with GatewayClient.http(http_server.url, token=GATEWAY_TOKEN) as gw:
        result = await gw.call("memory.write", {**WRITE, "subject": unique()})
        assert result.data["fact"]["provenance"] == "attested"
        assert result.data["fact"]["source"]["receiptId"] == result.receipt
        assert await gw.tool_names() == [
            "memory.write",
            "memory.read",
            "memory.confirm",
            "memory.retract",
            "memory.forget",
            "memory.hold",
            "memory.release",
            "memory.sweep",
            "memory.get",
            "memory.history",
        ]


async def test_direct_token_cannot_pass_the_gateway_requirement(http_server: HttpServer) -> None:
    async with GatewayClient.http(http_server.url, token=DIRECT_TOKEN) as direct:
        # Whatever _meta it sends, it is not a gateway.
        for tool, args in (
            ("memory.write", WRITE),
            ("memory.read", {}),
            ("memory.confirm", {"factId": "x"}),
        ):
            result = await direct.call(
                tool, args, receipt="rcpt-forged", agent="admin", observed={"crm": "pro"}
            )
            assert result.is_error
            assert result.text == (
                "memory server accepts calls only through the receipts "
                "gateway; no receipt id on this call"
            )


async def test_direct_token_gets_only_claimed(open_server: HttpServer) -> None:
    async with (
        GatewayClient.http(open_server.url, token=DIRECT_TOKEN) as direct,
        GatewayClient.http(open_server.url, token=GATEWAY_TOKEN) as gw,
    ):
        write = await direct.call(
            "memory.write",
            {**WRITE, "subject": unique(), "actor": "bot"},
            receipt="rcpt-forged",
            agent="admin",
        )
        fact = write.data["fact"]
        assert (fact["provenance"], fact["actor"], fact["source"]) == (
            "claimed",
            "bot",
            {"receiptId": None},
        )
        confirm = await direct.call(
            "memory.confirm", {"factId": fact["factId"]}, receipt="rcpt-forged", agent="admin"
        )
        assert confirm.text.startswith("confirmation must come through the receipts gateway")
        evidence = await direct.call(
            "memory.write",
            {**WRITE, "evidence": {"fact": "crm"}},
            receipt="r",
            agent="admin",
            observed={"crm": "pro"},
        )
        assert evidence.text.startswith("evidence needs the gateway")
        hidden = await direct.call("memory.read", {"subject": fact["subject"]})
        assert hidden.data == {"facts": []}
        confirmed = await gw.call("memory.confirm", {"factId": fact["factId"]})
        assert not confirmed.is_error
        shown = await direct.call("memory.read", {"subject": fact["subject"]})
        assert [f["provenance"] for f in shown.data["facts"]] == ["attested"]


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"Basic {GATEWAY_TOKEN}"},
        {"Authorization": f"Bearer {GATEWAY_TOKEN}x"},
        {"Authorization": "Bearer"},
        {"Authorization": f"bearer {GATEWAY_TOKEN[:-1]}"},
    ],
)
def test_missing_or_wrong_token_is_401(http_server: HttpServer, headers: dict[str, str]) -> None:
    response = httpx.post(
        http_server.url, headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}
    )
    assert response.status_code == 401
    assert response.text == '{"error":"unauthorized"}'


async def test_client_without_token_fails(http_server: HttpServer) -> None:
    with pytest.raises(BaseException):  # noqa: B017 - the SDK wraps it in an exception group
        async with GatewayClient.http(http_server.url, token="wrong", timeout=5):
            pass


def test_foreign_origin_403_and_host_421(http_server: HttpServer) -> None:
    auth = {"Authorization": f"Bearer {GATEWAY_TOKEN}"}
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    port = http_server.url.split(":")[2].split("/")[0]
    other = "3000" if port != "3000" else "3001"
    foreign = ("http://evil.example", "null", "http://127.0.0.1.evil.example")
    # the same host on another port or scheme is another site (SPEC 4.5)
    foreign += (f"http://localhost:{other}", f"https://localhost:{port}", "http://localhost")
    for origin in (*foreign, f"http://[::1]:{other}", f"https://127.0.0.1:{port}"):
        response = httpx.post(http_server.url, headers={**auth, "Origin": origin}, json=ping)
        assert response.status_code == 403, origin
    for host in ("evil.example", "evil.example:80", "127.0.0.1.nip.io"):
        response = httpx.post(http_server.url, headers={**auth, "Host": host}, json=ping)
        assert response.status_code == 421, host
    for alias in ("localhost", "127.0.0.1", "[::1]"):  # loopback aliases of the same port
        origin = f"http://{alias}:{port}"
        response = httpx.post(http_server.url, headers={**auth, "Origin": origin}, json=ping)
        assert response.status_code not in (401, 403, 421), origin


def test_other_paths_404(http_server: HttpServer) -> None:
    base = http_server.url.removesuffix("/mcp")
    for path in ("/", "/sse", "/mcp/x", "/health", "/mcp/"):
        response = httpx.get(base + path, headers={"Authorization": f"Bearer {GATEWAY_TOKEN}"})
        assert response.status_code == 404, path


async def test_oversized_body_is_413_and_server_keeps_serving(open_server: HttpServer) -> None:
    auth = {"Authorization": f"Bearer {GATEWAY_TOKEN}"}
    big = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "memory.write", "arguments": {**WRITE, "value": "x" * 30000}},
    }
    response = httpx.post(open_server.url, headers=auth, json=big)
    assert response.status_code == 413
    assert "max_request_bytes" in response.json()["error"]["message"]

    def chunks():  # no Content-Length: the limit holds on the streamed body too
        yield b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"'
        for _ in range(10):
            yield b"y" * 4000
        yield b'"}}'

    response = httpx.post(
        open_server.url, headers={**auth, "content-type": "application/json"}, content=chunks()
    )
    assert response.status_code == 413
    async with GatewayClient.http(open_server.url, token=GATEWAY_TOKEN) as gw:
        with pytest.raises(MCPError) as caught:
            await gw.call("memory.write", {**WRITE, "value": "x" * 30000})
        assert "too large" in str(caught.value)
        result = await gw.call("memory.write", {**WRITE, "subject": unique()})
        assert not result.is_error


def test_non_loopback_without_token_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agent_custody_state import cli

    code = cli.main(
        [
            "serve",
            "--ledger",
            str(tmp_path / "l.jsonl"),
            "--http",
            "--host",
            "0.0.0.0",
            "--port",
            "0",
        ]
    )
    assert code == 1
    assert "refusing to serve on 0.0.0.0 without a bearer token" in capsys.readouterr().err
    assert not (tmp_path / "l.jsonl").exists()


def test_startup_line_names_ledger_count_and_trust(http_server: HttpServer) -> None:
    line = "".join(http_server.lines[:2])
    assert "http.jsonl (jsonl, " in line and " events)" in line
    assert "trust: 1 gateway token, 1 direct token; calls without a receipt are refused" in line
    deadline = time.monotonic() + 10  # the drain thread reads the warning line a moment later
    while "warning: no forget key" not in "".join(http_server.lines):
        assert time.monotonic() < deadline, http_server.lines
        time.sleep(0.05)


def test_a_taken_port_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    from agent_custody_state import cli

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = cli.main(
            ["serve", "--ledger", str(tmp_path / "l.jsonl"), "--http", "--port", str(port)]
        )
    assert code == 1
    err = capsys.readouterr().err
    assert err.endswith(f"error: cannot listen on 127.0.0.1:{port}: Address already in use\n")

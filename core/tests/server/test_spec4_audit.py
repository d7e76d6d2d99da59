"""SPEC 4.5, audited: the front door refuses the same way whatever the HTTP method.

Host (421), Origin (403) and the bearer token (401 ``{"error":"unauthorized"}``) are checked
before anything else answers, so a request with a method ``/mcp`` does not serve (``PUT``,
``PATCH``, ``OPTIONS``) is refused for its Host, Origin or token first, and only an authorised
one learns that the method is not served (405). Before, the router answered those methods 405
(plain text) before the guard looked at the request.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from servertest import HEADERS, INIT

from agent_custody_state import Ledger, serve_memory_http
from agent_custody_state.server.http import MemoryHttpServer

TOKEN = "gw-token-0123456789abcdef"
OTHER_METHODS = ("PUT", "PATCH", "OPTIONS")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[MemoryHttpServer]:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    running = serve_memory_http(ledger, port=0, tokens={TOKEN: "gateway"})
    try:
        yield running
    finally:
        running.close()
        ledger.close()


@pytest.mark.parametrize("method", OTHER_METHODS)
def test_any_method_without_a_token_is_401(server: MemoryHttpServer, method: str) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"}):
        response = httpx.request(method, server.url, headers=headers, timeout=10)
        assert response.status_code == 401, (method, headers)
        assert response.text == '{"error":"unauthorized"}'


@pytest.mark.parametrize("method", OTHER_METHODS)
def test_any_method_from_a_foreign_origin_or_host_is_refused(
    server: MemoryHttpServer, method: str
) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    origin = httpx.request(
        method, server.url, headers={**auth, "Origin": "http://evil.example"}, timeout=10
    )
    assert origin.status_code == 403
    host = httpx.request(method, server.url, headers={**auth, "Host": "evil.example"}, timeout=10)
    assert host.status_code == 421


@pytest.mark.parametrize("method", OTHER_METHODS)
def test_an_authorised_unserved_method_is_405(server: MemoryHttpServer, method: str) -> None:
    response = httpx.request(
        method, server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
    )
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, POST, DELETE"
    assert response.json() == {"error": "method not allowed: /mcp takes GET, POST and DELETE"}


def test_served_methods_still_reach_the_mcp_layer(server: MemoryHttpServer) -> None:
    headers = {**HEADERS, "Authorization": f"Bearer {TOKEN}"}
    assert httpx.post(server.url, json=INIT, headers=headers, timeout=10).status_code == 200
    # GET and DELETE without a session: the SDK's answer (not the guard's 405).
    for method in ("GET", "DELETE"):
        response = httpx.request(method, server.url, headers=headers, timeout=10)
        assert response.status_code not in (401, 403, 405, 421), method

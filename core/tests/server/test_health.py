"""``GET /healthz`` and ``GET /readyz``: probes for load balancers and orchestrators.

A server behind a load balancer or in Kubernetes could only be asked whether it was up through
an MCP call, which needs a token (every other path was a 404). The probes answer without one,
say nothing beyond ready or not and a short code, cost the ledger at most one cheap read a
second, take no write lock, and leave the ``/mcp`` checks (Host, Origin, token) as they were.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from servertest import HEADERS, INIT, HttpServer, start_http

from agent_custody_state import Ledger
from agent_custody_state.server.health import LEDGER_UNAVAILABLE, Readiness
from agent_custody_state.server.http import create_memory_http_server

NOT_READY = {"status": "not_ready", "reason": LEDGER_UNAVAILABLE}
#: Every header a probe's answer may carry: nothing naming the server, its version or its ledger.
PLAIN_HEADERS = {"date", "content-type", "content-length", "cache-control", "connection"}


def base(server: HttpServer) -> str:
    return server.url.removesuffix("/mcp")


def raw(port: int, request: bytes) -> bytes:
    """``request`` sent on a fresh connection; everything the server sent back."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(request)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    return data


def until(url: str, status: int, timeout: float = 10) -> httpx.Response:
    """``GET url`` until it answers ``status`` (the readiness outcome is kept for a second)."""
    deadline = time.monotonic() + timeout
    while True:
        response = httpx.get(url, timeout=5)
        if response.status_code == status or time.monotonic() > deadline:
            return response
        time.sleep(0.05)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """A server with tokens, answering to ``memory:8790`` besides its loopback names."""
    folder = tmp_path_factory.mktemp("health")
    served = start_http(
        "--ledger",
        str(folder / "l.jsonl"),
        "--token-env",
        "MEMORY_TOKEN",
        "--allowed-host",
        "memory:8790",
    )
    yield served
    served.stop()


def test_liveness_answers_ok_without_a_token(server: HttpServer) -> None:
    response = httpx.get(base(server) + "/healthz", timeout=10)
    assert (response.status_code, response.json()) == (200, {"status": "ok"})
    assert response.headers["cache-control"] == "no-store"
    assert httpx.post(server.url, json=INIT, headers=HEADERS, timeout=10).status_code == 401


def test_readiness_answers_ready_without_a_token(server: HttpServer) -> None:
    response = httpx.get(base(server) + "/readyz", timeout=10)
    assert (response.status_code, response.json()) == (200, {"status": "ready"})
    assert set(response.headers) <= PLAIN_HEADERS, response.headers
    head = httpx.head(base(server) + "/readyz", timeout=10)
    assert (head.status_code, head.content) == (200, b"")


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "OPTIONS"])
def test_probes_take_only_get_and_head(server: HttpServer, path: str, method: str) -> None:
    response = httpx.request(method, base(server) + path, timeout=10)
    assert response.status_code == 405, response.text
    assert response.headers["allow"] == "GET, HEAD"


def test_a_probe_by_pod_address_is_answered_and_mcp_still_checks_host(server: HttpServer) -> None:
    """A kubelet probes by the pod's address, which no ``allowed_hosts`` names; ``/mcp`` keeps
    its DNS rebinding check (421) for that same Host."""
    port = server.url.rsplit(":", 1)[1].split("/")[0]
    pod = {"Host": f"10.1.2.3:{port}"}
    assert httpx.get(base(server) + "/readyz", headers=pod, timeout=10).status_code == 200
    assert httpx.get(base(server) + "/healthz", headers=pod, timeout=10).status_code == 200
    refused = httpx.post(server.url, json=INIT, headers={**HEADERS, **pod}, timeout=10)
    assert refused.status_code == 421


def test_a_foreign_origin_is_refused(server: HttpServer) -> None:
    page = {"Origin": "http://evil.example"}
    for path in ("/healthz", "/readyz"):
        assert httpx.get(base(server) + path, headers=page, timeout=10).status_code == 403


def test_a_declared_body_over_the_limit_is_refused_unread(server: HttpServer) -> None:
    port = int(server.url.rsplit(":", 1)[1].split("/")[0])
    answer = raw(port, b"GET /readyz HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 413"), answer


def test_a_ledger_that_cannot_answer_is_not_ready_and_says_no_more(tmp_path: Path) -> None:
    """Another process leaves a line that is no event at the end of the JSONL ledger: every
    call fails from then on, and so does readiness, with the code alone (the cause, naming the
    file, goes to the server's log). Taken away, the server is ready again."""
    ledger = tmp_path / "secret-place" / "l.jsonl"
    ledger.parent.mkdir()
    served = start_http("--ledger", str(ledger), "--token-env", "MEMORY_TOKEN")
    try:
        ready = base(served) + "/readyz"
        assert httpx.get(ready, timeout=10).status_code == 200
        intact = ledger.read_bytes() if ledger.exists() else b""  # made by the first write
        ledger.write_bytes(intact + b'{"not": "an event"}\n')
        response = until(ready, 503)
        assert (response.status_code, response.json()) == (503, NOT_READY)
        assert "secret-place" not in response.text and "jsonl" not in response.text
        assert set(response.headers) <= PLAIN_HEADERS, response.headers
        assert httpx.get(base(served) + "/healthz", timeout=10).status_code == 200  # alive
        ledger.write_bytes(intact)
        assert until(ready, 200).status_code == 200
    finally:
        served.stop()
    log = "".join(served.lines)
    assert "readiness: not ready (ledger_unavailable)" in log, log


def test_readiness_takes_no_write_lock(tmp_path: Path) -> None:
    """A JSONL writer takes the lock file exclusively; the probe reads under a shared lock, so
    it answers while another process holds a shared one (as a reader does)."""
    ledger = tmp_path / "l.jsonl"
    served = start_http("--ledger", str(ledger))
    try:
        with open(f"{ledger}.lock", "rb") as lock:
            fcntl.flock(lock, fcntl.LOCK_SH)
            response = httpx.get(base(served) + "/readyz", timeout=10)
            fcntl.flock(lock, fcntl.LOCK_UN)
        assert (response.status_code, response.json()) == (200, {"status": "ready"})
    finally:
        served.stop()


SLOW_STORE = """
import os, pathlib, anyio
from agent_custody_state.stores import inprocess

_put = inprocess.InProcessStore.put

async def put(self, fact):
    if self.name == "slow":
        pathlib.Path(os.environ["SLOW_MARK"]).write_text("putting")
        while not pathlib.Path(os.environ["SLOW_RELEASE"]).exists():
            await anyio.sleep(0.02)
    return await _put(self, fact)

inprocess.InProcessStore.put = put
"""


def test_a_stopping_server_is_never_reported_ready(tmp_path: Path) -> None:
    """SIGTERM with a slow write in flight: from the signal on, ``/readyz`` answers
    ``draining`` until the listener closes (then a probe is refused), and the write is still
    answered."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(SLOW_STORE)
    (tmp_path / "m.toml").write_text(
        'ledger = "l.jsonl"\n[server]\nallow_direct = true\n[[stores]]\nname = "slow"\n'
        'type = "memory"\n'
    )
    mark, release = tmp_path / "putting", tmp_path / "release"
    path = os.pathsep.join(filter(None, [str(tmp_path / "site"), os.environ.get("PYTHONPATH")]))
    env = {"PYTHONPATH": path, "SLOW_MARK": str(mark), "SLOW_RELEASE": str(release)}
    served = start_http("--config", str(tmp_path / "m.toml"), env=env)
    answers: list[Any] = []

    def write() -> None:
        arguments = {"subject": "s", "predicate": "p", "value": "v", "space": "org"}
        call = {"name": "memory.write", "arguments": arguments}
        body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}
        with httpx.Client(timeout=30) as client:
            opened = client.post(served.url, json=INIT, headers=HEADERS)
            session = {**HEADERS, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            client.post(served.url, json=note, headers=session)
            answers.append(client.post(served.url, json=body, headers=session))

    caller = threading.Thread(target=write)
    try:
        assert httpx.get(base(served) + "/readyz", timeout=10).status_code == 200
        caller.start()
        deadline = time.monotonic() + 30
        while not mark.exists():
            assert time.monotonic() < deadline and served.proc.poll() is None
            time.sleep(0.02)
        served.proc.send_signal(signal.SIGTERM)
        seen: list[object] = []
        for _ in range(5):
            try:
                response = httpx.get(base(served) + "/readyz", timeout=5)
                seen.append((response.status_code, response.json()))
            except httpx.ConnectError:
                seen.append("refused")
        draining = (503, {"status": "not_ready", "reason": "draining"})
        assert all(s in ("refused", draining) for s in seen), seen
        release.write_text("go")
        caller.join(30)
        assert served.proc.wait(30) == 0
    finally:
        release.write_text("go")
        served.stop()
    assert answers and answers[0].status_code == 200, answers
    assert json.loads(answers[0].text)["result"]["isError"] is False, answers[0].text


# -- in process: the stop, the worker, the cost ------------------------------------------------


@pytest.mark.anyio
async def test_a_stop_makes_readiness_draining_at_once(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "l.jsonl")
    server = create_memory_http_server(ledger, port=0, require_gateway=False)
    transport = httpx.ASGITransport(app=server.app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            assert (await client.get("/readyz")).status_code == 200
            server.request_stop()
            response = await client.get("/readyz")
            assert (response.status_code, response.json()) == (
                503,
                {"status": "not_ready", "reason": "draining"},
            )
            assert (await client.get("/healthz")).status_code == 200  # still alive
    finally:
        server.memory.close()
        ledger.close()


@pytest.mark.anyio
@pytest.mark.parametrize("broken", ["ledger closed", "worker ended"])
async def test_a_closed_ledger_or_ended_worker_is_not_ready(tmp_path: Path, broken: str) -> None:
    ledger = Ledger(tmp_path / "l.jsonl")
    server = create_memory_http_server(ledger, port=0, require_gateway=False)
    assert server.readiness is not None
    server.readiness.cache_seconds = 0  # every probe asks the ledger
    transport = httpx.ASGITransport(app=server.app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            assert (await client.get("/readyz")).status_code == 200
            if broken == "ledger closed":
                ledger.close()
            else:
                server.memory.memory.worker.close()
            response = await client.get("/readyz")
            assert (response.status_code, response.json()) == (503, NOT_READY)
    finally:
        server.memory.close()
        ledger.close()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.anyio
async def test_a_flood_of_probes_costs_one_ledger_read_a_second() -> None:
    clock, gate = Clock(), asyncio.Event()
    reads = 0

    async def probe() -> None:
        nonlocal reads
        reads += 1
        await gate.wait()

    readiness = Readiness(probe, clock=clock)
    checks = [asyncio.ensure_future(readiness.check()) for _ in range(50)]
    await asyncio.sleep(0)
    gate.set()
    assert await asyncio.gather(*checks) == [None] * 50
    assert reads == 1
    clock.now += 0.9
    assert [await readiness.check() for _ in range(50)] == [None] * 50
    assert reads == 1  # kept for a second
    clock.now += 0.2
    assert await readiness.check() is None
    assert reads == 2


@pytest.mark.anyio
async def test_a_stuck_ledger_read_is_not_ready_and_not_queued_again() -> None:
    """A read with no answer in time: ``ledger_unavailable``; later probes wait for that same
    read instead of queueing more behind it on the ledger's single worker thread."""
    clock, gate = Clock(), asyncio.Event()
    reads = 0

    async def probe() -> None:
        nonlocal reads
        reads += 1
        await gate.wait()

    readiness = Readiness(probe, clock=clock, timeout=0.05)
    assert await readiness.check() == LEDGER_UNAVAILABLE
    clock.now += 5
    assert await readiness.check() == LEDGER_UNAVAILABLE
    assert reads == 1
    gate.set()
    clock.now += 5
    assert await readiness.check() is None  # that read's answer, or a new one's

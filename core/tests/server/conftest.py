"""Fixtures for the memory server tests: real subprocess servers, the official MCP client.

Servers run as ``python -m agent_custody_state serve ...`` subprocesses and are driven over
real stdio and real HTTP; spawning costs about a second, so servers are shared per module and
each test works in its own subject or space.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from servertest import HttpServer, run_cli, start_http

from agent_custody_state_conformance.gateway import GatewayClient


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A server's signing key pair from ``keygen``: the private key and its public key."""
    folder = tmp_path_factory.mktemp("keys")
    done = run_cli("keygen", "--out", str(folder / "memory.key"))
    assert done.returncode == 0, done.stderr
    return folder / "memory.key", folder / "memory.key.pub"


@pytest.fixture(scope="module")
def module_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ledger")


@pytest.fixture(scope="module")
def http_server(module_dir: Path) -> Iterator[HttpServer]:
    """Gateway-only HTTP server with one gateway and one direct token."""
    server = start_http(
        "--ledger",
        str(module_dir / "http.jsonl"),
        "--token-env",
        "MEMORY_TOKEN",
        "--direct-token-env",
        "AGENT_TOKEN",
    )
    yield server
    server.stop()


@pytest.fixture(scope="module")
async def gw(module_dir: Path) -> AsyncIterator[GatewayClient]:
    """A stdio server on a fresh JSONL ledger, called as the gateway (agent ``support-agent``);
    spaces ``sweep:*`` have a zero retention window."""
    async with GatewayClient.stdio(
        "serve",
        "--ledger",
        str(module_dir / "stdio.jsonl"),
        "--retention",
        "sweep:*=PT0S",
        agent="support-agent",
    ) as client:
        yield client

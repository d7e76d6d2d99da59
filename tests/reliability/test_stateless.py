"""Stateless HTTP (issue 13 section 4): two server processes, one ledger, calls alternating.

Two ``serve --http --stateless`` processes share a SQLite file or a PostgreSQL database. One
client alternates every call between them (as a load balancer without affinity would): a chain
of supersessions where each step supersedes the value the other process wrote. The ledger must
hold one consistent history: every write acknowledged is there, each supersedes the one before,
and a read from either process sees only the last value. Neither process offers subscriptions
(they would live in one process only).
"""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.model import AssertEvent

from .mcpkit import RawMcp, ServerProcess, gateway_meta, http_client
from .support import record

TOKEN = "gw-" + uuid.uuid4().hex
STEPS = 20


async def alternate(urls: list[str]) -> tuple[list[str], list[dict[str, object]]]:
    async with http_client() as client:
        peers = [await RawMcp(client, url, TOKEN).open() for url in urls]
        assert all("mcp-session-id" not in p.headers for p in peers), "a session was opened"
        subject = f"s:{uuid.uuid4().hex[:8]}"
        written: list[str] = []
        for step in range(STEPS):
            args = {"subject": subject, "predicate": "plan", "value": step, "space": "org"}
            if written:
                args["supersedes"] = written[-1]
            result = await peers[step % 2].call("memory.write", args, gateway_meta())
            assert not result.get("isError") and "texts" in result, result
            written.append(json.loads(result["texts"][0])["fact"]["factId"])
        reads = []
        for peer in peers:
            result = await peer.call("memory.read", {"subject": subject}, gateway_meta())
            reads.append(json.loads(result["texts"][0]))
        return written, reads


@pytest.mark.parametrize("location", ["sqlite", "postgres"], indirect=True)
def test_two_stateless_processes_keep_one_history(location: str) -> None:
    args = ["--ledger", location, "--token-env", "STATELESS_TOKEN", "--stateless"]
    servers = [ServerProcess(args, {"STATELESS_TOKEN": TOKEN}) for _ in range(2)]
    try:
        assert all("stateless" in s.stderr for s in servers), servers[0].stderr
        written, reads = asyncio.run(alternate([s.url for s in servers]))
    finally:
        for server in servers:
            server.stop()
    for read in reads:
        assert [f["factId"] for f in read["facts"]] == [written[-1]]  # type: ignore[index]
    with Ledger(location) as ledger:
        asserts = [e for e in ledger.export() if isinstance(e, AssertEvent)]
        chain = [e for e in asserts if e.fact_id in set(written)]
        # every acknowledged write is there, in the order written, each superseding the last
        assert [e.fact_id for e in chain] == written
        assert [e.supersedes for e in chain] == [None, *written[:-1]]
    kind = "postgres" if location.startswith("postgres") else "sqlite"
    record(f"stateless[{kind}]", servers=2, writes=STEPS, lost=0)


def test_stateless_declares_no_subscriptions(tmp_path_factory: pytest.TempPathFactory) -> None:
    location = str(tmp_path_factory.mktemp("stateless") / "ledger.sqlite")
    server = ServerProcess(
        ["--ledger", location, "--token-env", "STATELESS_TOKEN", "--stateless"],
        {"STATELESS_TOKEN": TOKEN},
    )

    async def capabilities() -> dict[str, object]:
        async with http_client() as client:
            peer = RawMcp(client, server.url, TOKEN)
            reply = await peer.rpc(
                "initialize",
                {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"},
                },
            )
            return reply["result"]["capabilities"]  # type: ignore[no-any-return]

    try:
        caps = asyncio.run(capabilities())
    finally:
        server.stop()
    assert "tools" in caps
    assert not (caps.get("resources") or {}).get("subscribe"), caps  # type: ignore[union-attr]

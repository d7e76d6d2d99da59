"""Crash loop through the server: SIGKILL ``serve --http`` under load, restart, check.

The ledger-level crash loops (``test_crash_loops.py``) kill a process calling the Ledger. This
one kills the real server while 8 HTTP clients write through it, so the kill lands in the
server's own write path too: the group commit that hands concurrent writes to the ledger as one
batch, the store mirror, the ledger worker thread. After each kill the server is restarted on the
same ledger and the history is checked: every write a client got an answer for is there, no
batch is half-applied (every fact id a client was told about is either there or its call failed),
and every acknowledged forget left no byte of its value in the ledger's files.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.model import ForgetEvent

from .mcpkit import RawMcp, ServerProcess, gateway_meta, http_client
from .support import files_under, record, scale, scan

TOKEN = "gw-" + uuid.uuid4().hex
ENV = {"CRASH_GW_TOKEN": TOKEN}


async def writer(url: str, acked: list[dict[str, Any]], stop: asyncio.Event, seed: int) -> None:
    rng = random.Random(seed)
    mine: list[tuple[str, str]] = []  # (fact id, marker) of facts this client wrote
    try:
        async with http_client(timeout=10) as http:
            mcp = await RawMcp(http, url, TOKEN).open()
            while not stop.is_set():
                if mine and rng.random() < 0.25:
                    fid, marker = mine.pop(rng.randrange(len(mine)))
                    out = await mcp.call(
                        "memory.forget", {"factId": fid, "reason": "crash"}, gateway_meta()
                    )
                    if out.get("isError") is False:
                        acked.append({"kind": "forget", "factId": fid, "marker": marker})
                    continue
                marker = uuid.uuid4().hex
                args: dict[str, Any] = {
                    "subject": f"c{seed}-{rng.randrange(4)}",
                    "predicate": "p",
                    "value": {"m": marker},
                    "space": "org",
                }
                out = await mcp.call("memory.write", args, gateway_meta())
                if out.get("isError") is False:
                    data = json.loads(out["texts"][0])
                    acked.append(
                        {
                            "kind": "assert",
                            "eventId": data["eventId"],
                            "factId": data["fact"]["factId"],
                            "marker": marker,
                        }
                    )
                    mine.append((data["fact"]["factId"], marker))
    except (httpx.HTTPError, RuntimeError, KeyError, ValueError):
        return  # the server died under us: expected


async def load_and_kill(
    server: ServerProcess, clients: int, seconds: float, acked: list[dict[str, Any]]
) -> None:
    stop = asyncio.Event()
    tasks = [asyncio.create_task(writer(server.url, acked, stop, i)) for i in range(clients)]
    await asyncio.sleep(seconds)
    server.proc.send_signal(signal.SIGKILL)
    await asyncio.sleep(0.2)
    stop.set()
    await asyncio.gather(*tasks)


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
def test_server_killed_under_load(tmp_path: Path, backend: str) -> None:
    kills = scale(3, 25)
    folder = tmp_path / "ledger"
    folder.mkdir()
    location = str(folder / f"ledger.{backend}")
    rng = random.Random(9)
    acked: list[dict[str, Any]] = []
    survived = 0
    for _ in range(kills):
        server = ServerProcess(["--ledger", location, "--token-env", "CRASH_GW_TOKEN"], ENV)
        try:
            asyncio.run(load_and_kill(server, 8, rng.uniform(0.3, 2.0), acked))
        finally:
            server.stop()
        assert server.proc.returncode == -signal.SIGKILL
        with Ledger(location) as ledger:
            events = list(ledger.export())
        ids = {e.event_id for e in events}
        forgotten = {e.fact_id for e in events if isinstance(e, ForgetEvent)}
        lost = [a for a in acked if a["kind"] == "assert" and a["eventId"] not in ids]
        lost += [a for a in acked if a["kind"] == "forget" and a["factId"] not in forgotten]
        assert not lost, f"acknowledged writes lost after a kill: {lost[:3]}"
        needles = [a["marker"].encode() for a in acked if a["kind"] == "forget"]
        hits = scan(files_under(folder), needles)
        assert not hits, f"an acknowledged forget left its value on disk: {hits}"
        survived += 1
    writes = sum(a["kind"] == "assert" for a in acked)
    record(
        f"server_crash[{backend}]",
        kill_points=survived,
        clients=8,
        acknowledged_writes=writes,
        acknowledged_forgets=len(acked) - writes,
        events_lost=0,
        erased_bytes_found=0,
    )

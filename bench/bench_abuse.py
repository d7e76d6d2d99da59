"""Benchmark: one abusive client against the HTTP memory server, and what the gateway sees.

    python bench/bench_abuse.py            # full run
    python bench/bench_abuse.py --quick    # smaller figures (smoke test)

Three attacks from issue 11 item 4, each against a fresh ``serve --http`` subprocess on a JSONL
ledger (default limits, a gateway token and a direct token, ``--allow-direct``), while a
gateway client keeps calling ``memory.read`` and its latencies are recorded:

1. **session flood**: the direct token opens sessions as fast as it can (six at a time) and never
   closes them. Figures: sessions opened, sessions the token still holds afterwards, server
   memory, gateway p50/p99, and whether the gateway could still open sessions.
2. **slowloris**: the server runs with ``ulimit -n 256``; the attacker holds as many connections
   as it can that never finish their headers, reopening each one the server closes. Figures:
   connections attempted, the gateway's calls on fresh connections (answered, p50/p99), bytes
   the server logged.
3. **heavy value**: a 3.6 MB write of 900,000 numbers, repeated, then the largest values the
   default limits accept (10,000 numbers; a 1,000,000-character string). Figures: how each
   write ends and how long it takes, and gateway p50/p99/max meanwhile, beside an idle baseline.

It runs against whatever ``agent_custody_state`` is importable, so the same script measures the
code before and after a change (``PYTHONPATH=<old checkout>/core/src python bench/...``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from benchkit.abuse_server import (
    DIRECT,
    GATEWAY,
    PROTOCOL,
    READ,
    Mcp,
    Server,
    call_body,
    gateway_reads,
    pct,
)

# -- 1. session flood ---------------------------------------------------------------------------


async def session_flood(server: Server, count: int) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=50, keepalive_expiry=2)
    async with httpx.AsyncClient(timeout=60, limits=limits) as http:
        stop = asyncio.Event()
        reads = asyncio.create_task(gateway_reads(http, server.url, stop))
        rss_before = server.rss_mib()
        sessions: list[str] = []
        refused = gateway_opens = gateway_refused = 0
        started = time.perf_counter()
        while len(sessions) + refused < count:
            batch = await asyncio.gather(
                *(Mcp(http, server.url, DIRECT).open() for _ in range(6)), return_exceptions=True
            )
            for item in batch:
                if isinstance(item, Mcp):
                    sessions.append(item.headers["mcp-session-id"])
                else:
                    refused += 1
            if (len(sessions) + refused) % 120 < 6 or len(sessions) + refused >= count:
                # now and then (and at the end) the gateway opens a session of its own
                gateway_opens += 1
                try:  # and closes it again, as a well-behaved client does
                    probe = await Mcp(http, server.url, GATEWAY).open()
                    await http.delete(server.url, headers=probe.headers)
                except RuntimeError:
                    gateway_refused += 1
        flood_s = time.perf_counter() - started
        stop.set()
        latencies, failures = await reads
        rss_after = server.rss_mib()
        held = 0
        for session in sessions:
            response = await http.post(
                server.url,
                content=b'{"jsonrpc":"2.0","id":3,"method":"ping"}',
                headers={
                    **Mcp(http, server.url, DIRECT).headers,
                    "mcp-session-id": session,
                    "mcp-protocol-version": PROTOCOL,
                },
            )
            held += response.status_code == 200
    return {
        "opened": len(sessions),
        "refused": refused,
        "seconds": round(flood_s, 1),
        "held_by_token": held,
        "rss_mib": f"{rss_before:.0f} -> {rss_after:.0f}",
        "gateway_p50_ms": round(pct(latencies, 0.5), 1),
        "gateway_p99_ms": round(pct(latencies, 0.99), 1),
        "gateway_failures": failures,
        "gateway_new_sessions": f"{gateway_opens - gateway_refused}/{gateway_opens}",
    }


# -- 2. slowloris ---------------------------------------------------------------------------------


def slowloris(server: Server, seconds: float, target: int) -> dict[str, Any]:
    attempted = 0
    held: list[socket.socket] = []
    stop = threading.Event()

    def attack() -> None:
        nonlocal attempted
        while not stop.is_set():
            alive = []
            for sock in held:  # keep the live ones dribbling, drop what the server closed
                try:
                    sock.send(b"a")
                    alive.append(sock)
                except OSError:
                    sock.close()
            held[:] = alive
            while len(held) < target and not stop.is_set():
                attempted += 1
                try:
                    sock = socket.create_connection(("127.0.0.1", server.port), timeout=1)
                    sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                    held.append(sock)
                except OSError:
                    break  # the backlog is full; try again next round
            stop.wait(0.5)

    thread = threading.Thread(target=attack, daemon=True)
    thread.start()
    time.sleep(2)  # let the attack build up

    async def gateway(fresh: bool) -> tuple[list[float], int]:
        latencies: list[float] = []
        failures = 0
        deadline = time.monotonic() + seconds
        async with httpx.AsyncClient(timeout=10) as kept:
            mcp: Mcp | None = None
            while time.monotonic() < deadline:
                started = time.perf_counter()
                try:
                    if fresh:  # a fresh connection each time: what a new gateway needs
                        async with httpx.AsyncClient(timeout=10) as http:
                            opened = await Mcp(http, server.url, GATEWAY).open()
                            ok, _ = await opened.call("memory.read", READ)
                    else:  # one kept-alive connection and session, as a running gateway has
                        mcp = mcp or await Mcp(kept, server.url, GATEWAY).open()
                        ok, _ = await mcp.call("memory.read", READ)
                except (httpx.HTTPError, RuntimeError):
                    ok = False
                if ok:
                    latencies.append(time.perf_counter() - started)
                else:
                    failures += 1
                await asyncio.sleep(0.1)
        return latencies, failures

    async def both() -> list[tuple[list[float], int]]:
        return list(await asyncio.gather(gateway(True), gateway(False)))

    (new_lat, new_fail), (kept_lat, kept_fail) = asyncio.run(both())
    stop.set()
    thread.join(5)
    for sock in held:
        sock.close()
    return {
        "attacker_connections": attempted,
        "gateway_new_conn_answered": f"{len(new_lat)}/{len(new_lat) + new_fail}",
        "new_conn_p50_ms": round(pct(new_lat, 0.5), 1),
        "new_conn_p99_ms": round(pct(new_lat, 0.99), 1),
        "gateway_kept_conn_answered": f"{len(kept_lat)}/{len(kept_lat) + kept_fail}",
        "kept_conn_p50_ms": round(pct(kept_lat, 0.5), 1),
        "kept_conn_p99_ms": round(pct(kept_lat, 0.99), 1),
        "server_alive": server.proc.poll() is None,
        "log_bytes": server.log_bytes,
    }


# -- 3. heavy values ---------------------------------------------------------------------------


async def heavy(server: Server, seconds: float) -> list[dict[str, Any]]:
    cases: list[tuple[str, Any]] = [
        ("idle baseline", None),
        ("900,000 numbers (3.6 MB)", [0.5] * 900_000),
        ("10,000 numbers", [0.5] * 10_000),
        ("1,000,000-character string", "x" * 1_000_000),
    ]
    rows = []
    async with httpx.AsyncClient(timeout=120) as http:
        writer = await Mcp(http, server.url, GATEWAY).open()
        for label, value in cases:
            body = call_body(
                "memory.write", {"subject": "big", "predicate": "p", "space": "org", "value": value}
            )
            stop = asyncio.Event()
            reads = asyncio.create_task(gateway_reads(http, server.url, stop, pause=0.01))
            writes: list[float] = []
            outcome = "-"
            deadline = time.monotonic() + seconds
            while value is not None and time.monotonic() < deadline:
                started = time.perf_counter()
                response = await writer.post(body)
                writes.append(time.perf_counter() - started)
                result = response.json().get("result", {}) if response.status_code == 200 else {}
                text = (result.get("content") or [{}])[0].get("text", "")
                outcome = (
                    f"HTTP {response.status_code}"
                    if not result
                    else "refused: " + text[:40]
                    if result.get("isError")
                    else "accepted"
                )
            if value is None:
                await asyncio.sleep(seconds)
            stop.set()
            latencies, failures = await reads
            rows.append(
                {
                    "value": label,
                    "body_bytes": len(body) if value is not None else 0,
                    "outcome": outcome,
                    "writes": len(writes),
                    "write_ms": round(statistics.median(writes) * 1000, 1) if writes else "-",
                    "gateway_p50_ms": round(pct(latencies, 0.5), 1),
                    "gateway_p99_ms": round(pct(latencies, 0.99), 1),
                    "gateway_max_ms": round(pct(latencies, 1.0), 1),
                    "gateway_failures": failures,
                }
            )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + " --- |" * len(keys)]
    lines += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--flood", type=int, help="sessions the flood opens (default 3000)")
    parser.add_argument(
        "--only",
        choices=("flood", "slowloris", "heavy"),
        action="append",
        help="run only this attack (repeatable)",
    )
    args = parser.parse_args()
    only = set(args.only or ("flood", "slowloris", "heavy"))
    flood = args.flood or (300 if args.quick else 3000)
    seconds = 3.0 if args.quick else 10.0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if "flood" in only:
            print("## session flood\n")
            (folder / "a").mkdir()
            server = Server(folder / "a")
            try:
                print(table([asyncio.run(session_flood(server, flood))]), "\n")
            finally:
                server.stop()
        if "slowloris" in only:
            print("## slowloris (server under ulimit -n 256)\n")
            (folder / "b").mkdir()
            server = Server(folder / "b", nofile=256)
            try:
                print(table([slowloris(server, seconds, target=1000)]), "\n")
            finally:
                server.stop()
        if "heavy" in only:
            print("## heavy values\n")
            (folder / "c").mkdir()
            server = Server(folder / "c")
            try:
                print(table(asyncio.run(heavy(server, seconds))))
            finally:
                server.stop()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()

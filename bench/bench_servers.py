"""Several ``serve --http`` processes on one PostgreSQL ledger (issue 15, section 4).

For 1, 2 and 4 server processes sharing one ledger table, 32 clients (raw keep-alive MCP
clients, spread round-robin over the processes, as a load balancer would) call back to back for a
fixed time: three writes to one read. Each client writes its own subject, every write superseding
the client's previous fact by id, so each write is a validating one. Reported per point:
answered calls per second, p50 and p99 latency, errors by kind.

Then the ledger is checked against what the clients were told, as one total order:

* **no lost write**: every write answered ``ok`` is in the ledger, with the fact id returned;
* **no duplicate**: each client's values appear once, in the order written, each superseding
  the one before (the chain of supersessions has no fork);
* **one order**: transaction time never goes backwards along the append order, and
  ``agent-custody-memory verify`` accepts the chain.

Usage: ``python bench/bench_servers.py [--quick] [--seconds S] [--servers 1 2 4]``; results go to
``bench/out/servers.json``. The embedded server comes from the conformance fixture, with
``fsync=on``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from benchkit.http_load import RawClient
from benchkit.mcp_calls import TOKEN, pct, spawn_http

OUT = Path(__file__).resolve().parent / "out"
CLI = [sys.executable, "-m", "agent_custody_state"]
CLIENTS = 32


async def drive(ports: list[int], seconds: float) -> dict[str, Any]:
    """The clients' run: latencies, errors, and per client the fact ids its writes got."""
    latencies: list[float] = []
    errors: dict[str, int] = {}
    written: dict[str, list[tuple[int, str]]] = {}  # subject -> [(value, factId)] answered ok
    ready, go, window = [0], anyio.Event(), [0.0]

    async def client(index: int) -> None:
        raw = RawClient(ports[index % len(ports)], TOKEN)
        await raw.open()
        subject = f"client:{index}"
        args = {"subject": subject, "predicate": "counter", "space": "bench"}
        mine = written.setdefault(subject, [])
        outcome, result = "overload", None
        while outcome == "overload":
            outcome, result = await raw.call("memory.write", {**args, "value": 0})
        assert outcome == "ok", (outcome, result)
        mine.append((0, result["fact"]["factId"]))
        ready[0] += 1
        if ready[0] == CLIENTS:
            window[0] = time.monotonic()
            go.set()
        await go.wait()
        stop, i = window[0] + seconds, 0
        try:
            while time.monotonic() < stop:
                i += 1
                start = time.perf_counter()
                if i % 4:
                    value = mine[-1][0] + 1
                    sent = {**args, "value": value, "supersedes": mine[-1][1]}
                    outcome, result = await raw.call("memory.write", sent)
                    if outcome == "ok":
                        mine.append((value, result["fact"]["factId"]))
                else:
                    outcome, _ = await raw.call("memory.read", {"subject": subject})
                if outcome == "ok":
                    latencies.append((time.perf_counter() - start) * 1000)
                else:
                    errors[outcome] = errors.get(outcome, 0) + 1
                    if outcome == "overload":
                        await anyio.sleep(0.05)
        finally:
            raw.close()

    async with anyio.create_task_group() as tg:
        for index in range(CLIENTS):
            tg.start_soon(client, index)
    return {
        "calls": len(latencies),
        "per_s": len(latencies) / seconds,
        "p50": pct(latencies, 50) if latencies else float("nan"),
        "p99": pct(latencies, 99) if latencies else float("nan"),
        "errors": errors,
        "written": written,
    }


def check(url: str, written: dict[str, list[tuple[int, str]]]) -> list[str]:
    """What is wrong with the ledger against the answers the clients got (empty: nothing)."""
    from agent_custody_state.ledger.ledger import Ledger
    from agent_custody_state.ledger.model import AssertEvent

    problems: list[str] = []
    ledger = Ledger(url)
    try:
        events = list(ledger.export())
    finally:
        ledger.close()
    seen: dict[str, list[AssertEvent]] = {}
    last_tx = ""
    for event in events:
        if event.tx_time < last_tx:
            problems.append(f"txTime goes backwards at event {event.event_id}")
        last_tx = max(last_tx, event.tx_time)
        if isinstance(event, AssertEvent):
            seen.setdefault(event.fact.subject, []).append(event)
    for subject, answered in written.items():
        stored = seen.get(subject, [])
        values = [e.fact.value for e in stored]
        if values != list(range(len(values))):
            problems.append(f"{subject}: values {values[:8]}... are not 0, 1, 2, ... once each")
        ids = {e.fact.fact_id for e in stored}
        lost = [fid for _, fid in answered if fid not in ids]
        if lost:
            problems.append(f"{subject}: {len(lost)} writes answered ok are missing")
        for before, after in itertools.pairwise(stored):
            if after.supersedes != before.fact.fact_id:
                problems.append(f"{subject}: {after.fact.fact_id} does not supersede its previous")
                break
    verify = subprocess.run([*CLI, "verify", "--ledger", url], capture_output=True, text=True)
    if verify.returncode != 0:
        problems.append("verify: " + (verify.stdout + verify.stderr).strip().splitlines()[0])
    return problems


def run_point(url: str, servers: int, seconds: float) -> dict[str, Any]:
    procs: list[subprocess.Popen[str]] = []
    ports: list[int] = []
    try:
        for _ in range(servers):
            args = ["serve", "--ledger", url, "--http", "--port", "0", "--token-env", "BENCH_TOKEN"]
            proc, served = spawn_http([*CLI, *args], {"BENCH_TOKEN": TOKEN})
            procs.append(proc)
            ports.append(int(served.rsplit(":", 1)[1].split("/")[0]))
        result = anyio.run(drive, ports, seconds)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait()
    result["problems"] = check(url, result.pop("written"))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 s per point")
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--servers", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    seconds = args.seconds or (3.0 if args.quick else 10.0)
    from agent_custody_state_conformance.postgres import start_embedded_postgres

    base = Path(tempfile.mkdtemp(prefix="acs-bench-servers-"))
    os.chmod(base, 0o755)
    pg = start_embedded_postgres(base)
    results: dict[int, dict[str, Any]] = {}
    try:
        import psycopg

        with psycopg.connect(pg.admin_url, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET fsync = on")
            conn.execute("SELECT pg_reload_conf()")
        for servers in args.servers:
            url = f"{pg.url}&table=servers_{servers}"
            results[servers] = run_point(url, servers, seconds)
            r = results[servers]
            print(
                f"{servers} server(s), {CLIENTS} clients: {r['per_s']:.0f} calls/s, "
                f"p50 {r['p50']:.1f} ms, p99 {r['p99']:.1f} ms, errors {r['errors'] or 'none'}, "
                f"ledger check: {'; '.join(r['problems']) or 'one total order, nothing lost'}",
                flush=True,
            )
    finally:
        pg.stop()
    print("\n| servers | calls/s | p50 ms | p99 ms | errors | lost / duplicated / out of order |")
    print("| ---: | ---: | ---: | ---: | --- | --- |")
    for servers, r in results.items():
        errors = ", ".join(f"{k}: {v}" for k, v in r["errors"].items()) or "none"
        verdict = "; ".join(r["problems"]) or "none"
        print(
            f"| {servers} | {r['per_s']:.0f} | {r['p50']:.1f} | {r['p99']:.1f} | {errors} | "
            f"{verdict} |"
        )
    OUT.mkdir(exist_ok=True)
    (OUT / "servers.json").write_text(json.dumps({"seconds": seconds, "results": results}))
    sys.exit(1 if any(r["problems"] for r in results.values()) else 0)


if __name__ == "__main__":
    main()

"""Concurrent writers on one PostgreSQL ledger (issue 15, section 1), durable (``fsync=on``).

For 1, 2, 4 and 8 writer processes, each on its own subject, for a fixed time, in one run:

* ``raw``: the floor, one ``INSERT`` of a prepared row per durable commit (autocommit) into a
  table of the same layout and indexes, no lock;
* ``keys``: ``Ledger.assert_fact`` superseding the writer's previous fact (so every write
  validates: reads the fact, its superseders and events) with the default write section:
  advisory locks per key and the order lock to commit, the commit grouped (asynchronous under
  the lock, then a durable flush outside it that the server groups with other writers');
* ``keys-sync``: the same with ``?commit=sync``: the commit's WAL flush under the order lock;
* ``keys-unordered``: ``keys-sync`` without a shared order lock (bench only, patched in the
  worker: each writer's order lock is its own): the
  writers' side of a design that orders and chains events after commit (a sealer), i.e. the
  ceiling the order lock costs against;
* ``table``: the same ledger writes with ``?lock=table`` (``LOCK TABLE ... SHARE ROW
  EXCLUSIVE``, the write path before issue 15), on today's code otherwise (a stricter baseline
  than the old code: every later saving of round trips and server work applies to it too);
* ``before``: the code of the issue's day itself, ``LOCK TABLE`` and all (``--before REV``,
  default the last commit before key locks, checked out with ``git worktree`` into the
  temporary directory; its writers run its ``core``, ``sql`` and PostgreSQL plugin sources).

Usage: ``python bench/bench_scale.py [--quick] [--seconds S] [--writers 1 2 4 8]
[--modes ...] [--before REV] [--commit-delay US]``; results go to ``bench/out/scale.json``. ``--commit-delay`` sets the
server's ``commit_delay`` (microseconds; ``commit_siblings`` 1), the server-side alternative to
grouping commits. The embedded server comes from the conformance fixture.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "out"
MODES = ("raw", "keys", "keys-sync", "keys-unordered", "table", "before")
#: The last commit whose PostgreSQL write sections took ``LOCK TABLE`` (issue 15's "today").
BEFORE = "e567cef"
#: The source folders of a checkout that a ``before`` writer imports instead of today's.
SOURCES = ("core/src", "sql/src", "plugins/events-postgres/src")
SUFFIX = {"table": "&lock=table", "keys-sync": "&commit=sync", "keys-unordered": "&commit=sync"}


def _worker(
    mode: str, url: str, index: int, start: Any, stop_at: Any, out: Any, old: str | None
) -> None:
    """Write until ``stop_at`` (a shared monotonic deadline set after every worker is ready)."""
    if old is not None:  # a fresh (spawned) interpreter: nothing of today's code imported yet
        sys.path[:0] = [str(Path(old) / s) for s in SOURCES]
    if mode == "raw":
        import psycopg

        from agent_custody_state.plugin import AssertEvent, Fact
        from agent_custody_state_sql.schema import ROW_COLUMNS, event_row

        conn = psycopg.connect(url.split("&table=")[0])
        conn.autocommit = True
        server = conn.info.backend_pid
        sql = (
            f"INSERT INTO raw_events ({', '.join(ROW_COLUMNS)}) "
            f"VALUES ({', '.join(['%s'] * len(ROW_COLUMNS))})"
        )

        run = os.urandom(6).hex()  # ids unique across points: the raw table is shared

        def write(n: int) -> None:
            tx = "2025-01-01T00:00:00.000Z"
            fact = Fact(f"r{run}-{index}-{n}", f"w{index}", "city", n, "s", "b", valid_from=tx)
            row = event_row(AssertEvent(f"e{run}-{index}-{n}", tx, fact))
            conn.execute(sql, [row[c] for c in ROW_COLUMNS], prepare=True)
    else:
        from agent_custody_state.ledger.ledger import Ledger

        ledger = Ledger(url + SUFFIX.get(mode, ""))
        if mode == "keys-unordered":
            # Each writer gets an order lock of its own, so none waits for another's.
            backend: Any = ledger.backend
            backend._order_key ^= index + 1
        last = ledger.assert_fact(
            subject=f"w{index}", predicate="city", value=0, space="s", actor="b"
        )
        raw = getattr(ledger.backend, "_raw", None)  # the driver connection (both versions)
        server = raw.info.backend_pid if raw is not None else None

        def write(n: int) -> None:
            nonlocal last
            last = ledger.assert_fact(
                subject=f"w{index}", predicate="city", value=n, space="s", actor="b",
                supersedes=last.fact_id,
            )  # fmt: skip

    write(0)  # warm: connection, prepared statements
    start.wait()  # every worker is ready; the driver then sets the deadline
    start.wait()
    n = 0
    deadline = stop_at.value
    cpu, server_cpu = time.process_time(), _cpu_seconds(server)
    while time.monotonic() < deadline:
        n += 1
        write(n)
    out.put((n, time.process_time() - cpu, _cpu_seconds(server) - server_cpu))


def _cpu_seconds(pid: int | None) -> float:
    """CPU time of a local process (the writer's server backend: the embedded server runs
    here), from ``/proc``; NaN when unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def run_point(
    mode: str, url: str, writers: int, seconds: float, old: str | None
) -> tuple[float, float, float]:
    """Writes per second, and CPU microseconds per write of the writers and of their server
    backends."""
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(writers + 1)
    stop_at = ctx.Value("d", 0.0)
    out = ctx.Queue()
    procs = [
        ctx.Process(
            target=_worker,
            args=(mode, url, i, start, stop_at, out, old if mode == "before" else None),
        )
        for i in range(writers)
    ]
    for p in procs:
        p.start()
    start.wait(timeout=120)  # every worker is connected and warm
    began = time.monotonic()
    stop_at.value = began + seconds
    start.wait(timeout=120)
    got = [out.get(timeout=seconds + 120) for _ in procs]
    elapsed = time.monotonic() - began
    for p in procs:
        p.join()
    total = sum(n for n, _, _ in got) or 1
    client = sum(c for _, c, _ in got) / total * 1e6
    server = sum(c for _, _, c in got) / total * 1e6
    return total / elapsed, client, server


def _prepare(pg: Any, durable: bool, commit_delay: int) -> str:
    import psycopg

    from agent_custody_state_events_postgres.store import PostgresBackend
    from agent_custody_state_sql.schema import create_ddl

    with psycopg.connect(pg.admin_url, autocommit=True) as conn:
        conn.execute(f"ALTER SYSTEM SET fsync = {'on' if durable else 'off'}")
        conn.execute(f"ALTER SYSTEM SET commit_delay = {int(commit_delay)}")
        conn.execute("ALTER SYSTEM SET commit_siblings = 1")
        conn.execute("SELECT pg_reload_conf()")
    PostgresBackend(f"{pg.url}&table=warm").close()
    with psycopg.connect(pg.url) as conn:
        for ddl in create_ddl("raw_events", "raw_events", "BIGSERIAL PRIMARY KEY"):
            conn.execute(ddl)
        conn.commit()
        shown = conn.execute("SELECT current_setting('fsync'), current_setting('commit_delay')")
        fsync, delay = shown.fetchone() or ("?", "?")
    print(f"server fsync = {fsync}, commit_delay = {delay}", flush=True)
    return str(pg.url)


def _checkout(rev: str, where: Path) -> str:
    """``rev`` of this repository checked out at ``where`` (a detached ``git worktree``)."""
    repo = Path(__file__).resolve().parent.parent
    subprocess.run(
        ["git", "-C", str(repo), "worktree", "add", "--detach", "--quiet", str(where), rev],
        check=True,
    )
    return str(where)


def _ratio(r: dict[str, float], a: str, b: str) -> str:
    return f"{r[a] / r[b]:.2f}" if r.get(a) and r.get(b) else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 s per point")
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--rounds", type=int, default=None, help="median of N (quick: 3)")
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--no-fsync", action="store_true", help="measure without fsync")
    parser.add_argument("--commit-delay", type=int, default=0, help="server commit_delay, us")
    parser.add_argument("--before", default=BEFORE, help="the commit the before mode runs")
    args = parser.parse_args()
    seconds = args.seconds or (2.0 if args.quick else 8.0)
    from agent_custody_state_conformance.postgres import start_embedded_postgres

    base = Path(tempfile.mkdtemp(prefix="acs-bench-scale-"))
    os.chmod(base, 0o755)
    pg = start_embedded_postgres(base)
    old = _checkout(args.before, base / "before") if "before" in args.modes else None
    rounds = args.rounds or (3 if args.quick else 5)
    samples: dict[str, dict[int, list[float]]] = {
        m: {w: [] for w in args.writers} for m in args.modes
    }
    cpu: dict[str, dict[int, list[tuple[float, float]]]] = {
        m: {w: [] for w in args.writers} for m in args.modes
    }
    try:
        url = _prepare(pg, durable=not args.no_fsync, commit_delay=args.commit_delay)
        # Rounds of every point, modes interleaved: a shared machine's load drifts, and each
        # figure is the median of its rounds, so a burst of load elsewhere moves one sample.
        for r in range(rounds):
            for writers in args.writers:
                for mode in args.modes:
                    table = f"{mode.replace('-', '_')}_{writers}_{r}"
                    rate, client, server = run_point(
                        mode, f"{url}&table={table}", writers, seconds, old
                    )
                    samples[mode][writers].append(rate)
                    cpu[mode][writers].append((client, server))
                    print(
                        f"round {r} {mode} x{writers}: {rate:8.0f} writes/s, CPU per write "
                        f"{client:5.0f} us writer + {server:5.0f} us server",
                        flush=True,
                    )
    finally:
        pg.stop()
        if old is not None:
            subprocess.run(["git", "worktree", "remove", "--force", old], check=False)
    results = {m: {w: statistics.median(v) for w, v in ws.items()} for m, ws in samples.items()}
    print(
        "\nwriters | " + " | ".join(args.modes) + " | keys/raw | keys/table | keys/before"
        " | sync/table"
    )
    for w in args.writers:
        r = {m: results[m].get(w, 0.0) for m in args.modes}
        print(
            f"{w} | " + " | ".join(f"{r[m]:.0f}" for m in args.modes)
            + f" | {_ratio(r, 'keys', 'raw')} | {_ratio(r, 'keys', 'table')}"
            + f" | {_ratio(r, 'keys', 'before')}"
            + f" | {_ratio(r, 'keys-sync', 'table')}"
        )  # fmt: skip
    per_write = {
        m: {w: [statistics.median(c[i] for c in v) for i in (0, 1)] for w, v in ws.items() if v}
        for m, ws in cpu.items()
    }
    print("\nCPU per write, microseconds (writer process + its server backend), medians:")
    print("writers | " + " | ".join(args.modes))
    for w in args.writers:
        cells = [per_write[m].get(w, [float("nan")] * 2) for m in args.modes]
        print(f"{w} | " + " | ".join(f"{c:.0f} + {b:.0f}" for c, b in cells))
    OUT.mkdir(exist_ok=True)
    (OUT / "scale.json").write_text(
        json.dumps(
            {
                "seconds": seconds,
                "durable": not args.no_fsync,
                "commit_delay": args.commit_delay,
                "rounds": rounds,
                "before": args.before if old is not None else None,
                "median": results,
                "samples": samples,
                "cpu_per_write_us": per_write,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()

"""Batched ingest at the floor (issue 15, section 2): each figure beside a raw baseline of the
same run, on the same backend, into the same empty table with the same indexes.

Per backend (SQLite, PostgreSQL), rounds of, interleaved (a shared machine's load drifts; each
figure is the median of its rounds):

* ``raw``: the floor. SQLite: ``BEGIN IMMEDIATE; executemany(INSERT); COMMIT`` per batch, the
  rows already serialised, with the ledger's pragmas (WAL, ``synchronous=FULL``,
  ``secure_delete``). PostgreSQL: binary ``COPY ... FROM STDIN`` per batch of the same rows, one
  transaction each;
* ``import_events``: ``Ledger.import_events`` of the same events (``Event`` objects, as the
  ``import`` command hands them over after parsing the export). These events carry no chain
  (the original's export), so the chain check has nothing to hash (``importcheck``);
* ``import_chained``: an export of this implementation (every event chained: records, salts,
  commitments), its chain checked as ``verify`` would, against ``raw_chained``, the raw floor of
  the same (longer) rows;
  ``import_events_unchecked``: the same with ``check_chain=False`` (the chain check, ``verify``'s
  pass over the export, left to a caller that has just run it)
* ``assert_many``: ``Ledger.assert_many`` of fresh requests in batches, with the hash chain
  (what users get) and, beside it, ``chain=False``, so the chain's share is measured too.

Only the ingest calls are timed (not opening or closing the ledger, and not the raw side's
connection), in wall time and in CPU time of this process (steadier on a loaded machine; it
leaves out fsync waits and, for PostgreSQL, the server's work). Usage: ``python bench/bench_ingest.py [--quick] [--events N] [--backend ...]``;
results go to ``bench/out/ingest.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent_custody_state import Ledger
from agent_custody_state.ledger.model import Event
from agent_custody_state_sql.schema import ROW_COLUMNS, event_row
from benchkit.history import BATCH, PREDICATES, SPACES, generate

OUT = Path(__file__).resolve().parent / "out"
MODES = (
    *("raw", "import_events", "import_events_unchecked", "assert_many", "assert_many_nochain"),
    *("raw_chained", "import_chained"),
)
#: Each mode's floor (the rest: ``raw``).
FLOOR = {"import_chained": "raw_chained"}
COLS = ", ".join(ROW_COLUMNS)


def _items(n: int, run: str) -> list[dict[str, Any]]:
    return [
        {
            "subject": f"acct:{i // 4}",
            "predicate": PREDICATES[i % 4],
            "value": {"v": i, "note": f"value {i} of {PREDICATES[i % 4]}"},
            "space": SPACES[i % 8],
            "actor": "bench",
            "receipt_id": f"rcpt-{run}-{i}",
        }
        for i in range(n)
    ]


def _raw_sqlite(location: str, rows: list[tuple[Any, ...]]) -> tuple[float, float]:
    raw = sqlite3.connect(location, isolation_level=None)
    for pragma in ("journal_mode=WAL", "synchronous=FULL", "secure_delete=ON"):
        raw.execute(f"PRAGMA {pragma}")
    sql = f"INSERT INTO events ({COLS}) VALUES ({', '.join('?' * len(ROW_COLUMNS))})"
    start, cpu = time.perf_counter(), time.process_time()
    for k in range(0, len(rows), BATCH):
        raw.execute("BEGIN IMMEDIATE")
        raw.executemany(sql, rows[k : k + BATCH])
        raw.execute("COMMIT")
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    raw.close()
    return len(rows) / elapsed, len(rows) / cpu


def _raw_postgres(location: str, rows: list[tuple[Any, ...]]) -> tuple[float, float]:
    import psycopg

    from agent_custody_state_events_postgres.location import parse_location

    where = parse_location(location)
    conn = psycopg.connect(where.connect_url.replace("postgresql+psycopg", "postgresql"))
    start, cpu = time.perf_counter(), time.process_time()
    for k in range(0, len(rows), BATCH):
        copy = f"COPY {where.qualified} ({COLS}) FROM STDIN (FORMAT BINARY)"
        with conn.cursor() as cur, cur.copy(copy) as cp:
            cp.set_types(["text"] * len(ROW_COLUMNS))  # the faster of text and binary COPY
            for row in rows[k : k + BATCH]:
                cp.write_row(row)
        conn.commit()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    conn.close()
    return len(rows) / elapsed, len(rows) / cpu


def _timed(
    location: str, chain: bool, work: Callable[[Ledger], None], n: int
) -> tuple[float, float]:
    """Events per second of wall time and per second of this process's CPU time (on a loaded
    machine the second is the steadier figure; it leaves out fsync waits and, for PostgreSQL,
    the server's work)."""
    with Ledger(location, chain=chain) as ledger:
        start, cpu = time.perf_counter(), time.process_time()
        work(ledger)
        return n / (time.perf_counter() - start), n / (time.process_time() - cpu)


def chained_export(n: int) -> list[Event]:
    """An export of this implementation: ``n`` asserts written with the chain, as read back."""
    with Ledger("memory:", chain=True) as source:
        items = _items(n, "export")
        for k in range(0, n, BATCH):
            source.assert_many(items[k : k + BATCH])
        return list(source.backend.iter_events())


def one_round(
    backend: str,
    make_location: Callable[[str], str],
    events: list[Event],
    r: int,
    chained: list[Event],
) -> dict[str, float]:
    n = len(events)
    out: dict[str, float] = {}
    order = MODES if r % 2 == 0 else tuple(reversed(MODES))  # neither always runs first
    for mode in order:
        loc = make_location(f"{mode}_{r}")
        if mode in ("raw", "raw_chained"):
            source = events if mode == "raw" else chained
            rows = [tuple(event_row(e).values()) for e in source]  # serialised beforehand
            Ledger(loc).close()  # the same empty table with its indexes
            rate = (_raw_sqlite if backend == "sqlite" else _raw_postgres)(loc, rows)
        elif mode == "import_chained":

            def load_chained(led: Ledger) -> None:
                led.import_events(iter(chained), batch_size=BATCH)

            rate = _timed(loc, True, load_chained, n)
        elif mode.startswith("import_events"):
            checked = mode == "import_events"  # the default: the export's chain checked first

            def load(led: Ledger, checked: bool = checked) -> None:
                led.import_events(iter(events), batch_size=BATCH, check_chain=checked)

            rate = _timed(loc, True, load, n)
        else:
            items = _items(n, str(r))

            def many(led: Ledger, items: list[dict[str, Any]] = items) -> None:
                for k in range(0, n, BATCH):
                    led.assert_many(items[k : k + BATCH])

            rate = _timed(loc, mode == "assert_many", many, n)
        out[mode], out[f"{mode}_cpu"] = rate
        print(
            f"  {backend} round {r} {mode:20s} {rate[0]:9,.0f} events/s "
            f"({rate[1]:9,.0f} per CPU second)",
            flush=True,
        )
    return out


def report(backend: str, med: dict[str, float]) -> str:
    chain_share = 1 - med["assert_many"] / med["assert_many_nochain"]
    lines = [
        f"### {backend}",
        "",
        "| what | events/s | raw (same run) | ratio | target |",
        "| --- | --- | --- | --- | --- |",
    ]
    for mode in (m for m in MODES if not m.startswith("raw")):
        raw = med[FLOOR.get(mode, "raw")]
        lines.append(
            f"| {mode} | {med[mode]:,.0f} | {raw:,.0f} ({FLOOR.get(mode, 'raw')}) "
            f"| {med[mode] / raw:.2f} | >= 40,000/s and >= 0.80 |"
        )
    lines += [
        "",
        "| per CPU second of this process | events/s | raw | ratio |",
        "| --- | --- | --- | --- |",
    ]
    for mode in (m for m in MODES if not m.startswith("raw")):
        raw_cpu = med[f"{FLOOR.get(mode, 'raw')}_cpu"]
        cpu = med[f"{mode}_cpu"]
        lines.append(f"| {mode} | {cpu:,.0f} | {raw_cpu:,.0f} | {cpu / raw_cpu:.2f} |")
    lines.append(f"\nthe chain's share of assert_many's time: {chain_share:.0%}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 events, 3 rounds")
    parser.add_argument("--events", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--backend", nargs="+", default=["sqlite", "postgres"])
    args = parser.parse_args()
    n = args.events or (20_000 if args.quick else 100_000)
    rounds = args.rounds or (3 if args.quick else 5)
    events = list(generate(n, seed=3))
    chained = chained_export(n)
    workdir = Path(tempfile.mkdtemp(prefix="acs-bench-ingest-"))
    pg = None
    if "postgres" in args.backend:
        from agent_custody_state_conformance.postgres import start_embedded_postgres

        os.chmod(workdir, 0o755)
        pg = start_embedded_postgres(workdir / "pg")
    results: dict[str, Any] = {"events": n, "rounds": rounds, "samples": {}, "median": {}}
    try:
        for backend in args.backend:

            def make_location(name: str, backend: str = backend) -> str:
                if backend == "sqlite":
                    return str(workdir / f"{name}.sqlite")
                assert pg is not None
                return str(pg.create_database(f"ingest_{name}"))

            samples = [one_round(backend, make_location, events, r, chained) for r in range(rounds)]
            med = {m: statistics.median(s[m] for s in samples) for m in samples[0]}
            results["samples"][backend] = samples
            results["median"][backend] = med
            print("\n" + report(backend, med) + "\n", flush=True)
    finally:
        if pg is not None:
            pg.stop()
    results["load_average"] = os.getloadavg()[0]
    OUT.mkdir(exist_ok=True)
    (OUT / "ingest.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

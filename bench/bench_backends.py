"""Event-backend benchmarks (issue 3): each figure beside a baseline measured in the same run.

Builds ledgers of 1 million and 10 million events (a generated history over many subjects, four
predicates each, with supersession chains, retractions, confirmations, holds and releases, in
eight spaces, each subject's events spread over the whole file) and measures:

* as-of read by subject, p50/p99 -- ``Ledger.as_of(subject=...)`` beside ONE hand-written
  indexed SQL query computing the same answer (current, unretracted, unsuperseded asserts of the
  subject) on the raw driver, rows parsed with ``json.loads``;
* single durable append rate -- ``Ledger.assert_fact`` beside a raw ``BEGIN IMMEDIATE; INSERT;
  COMMIT`` with the same pragmas (WAL, synchronous=FULL);
* batched ingest rate -- ``Ledger.import_events`` and ``Ledger.assert_many`` beside a raw
  ``executemany`` of the same rows (already serialised) in transactions of the same size;
* open time and peak RSS while reading, in a fresh process.

Usage::

    python bench/bench_backends.py                         # SQLite, 1M and 10M events
    python bench/bench_backends.py --events 1000000 --backend sqlite postgres
    python bench/bench_backends.py --events 10000000 --keep  # reuse a built ledger

The 1M ledger is built through the ledger's batch path (``import_events``); the 10M one is loaded
with direct SQL (rows from the same generator, indexes created after the load), which is only
a faster way to get the same file. Results go to ``bench/out/backends-<size>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from agent_custody_state import Ledger
from agent_custody_state.ledger.model import (
    AssertEvent,
    ConfirmEvent,
    Event,
    Fact,
    HoldEvent,
    ReleaseEvent,
    RetractEvent,
    Source,
)
from agent_custody_state.timeutil import format_time
from agent_custody_state_sql.schema import COLUMNS_DDL, INDEXES, event_row, index_ddl

try:
    from tqdm import tqdm
except ImportError:  # a plain counter is enough
    tqdm = None

OUT = Path(__file__).resolve().parent / "out"
PREDICATES = ("plan", "email", "seats", "region")
SPACES = (
    "org",
    "team:support",
    "team:sales",
    "team:eng",
    "user:dana",
    "user:li",
    "user:sam",
    "user:ana",
)
EVENTS_PER_SUBJECT = 10
BATCH = 5000
T0 = datetime(2025, 1, 1, tzinfo=UTC)


# -- the generated history -------------------------------------------------------------------------


def _fid(s: int, p: int, v: int) -> str:
    return f"{s:08x}-{p:04x}-4{v:03x}-8000-{s * 4 + p:012x}"


def generate(n_events: int, seed: int = 7) -> Iterator[Event]:
    """A valid history of exactly ``n_events`` events, deterministic for a seed.

    Wave 1 asserts four predicates for every subject; later waves visit the subjects in a fresh
    random order and supersede (50%), confirm (15%), retract the head of a chain (15%) or hold
    and release (20%), so one subject's events are spread over the whole ledger.
    """
    rng = random.Random(seed)
    subjects = max(1, n_events // EVENTS_PER_SUBJECT)
    cells = subjects * len(PREDICATES)
    cur = bytearray(cells)  # current version of (subject, predicate)
    latest = bytearray(cells)  # highest version written
    parent = bytearray(cells)  # version the current one superseded (for a retraction)
    flags = bytearray(cells)  # 1: current confirmed, 2: head retracted since last assert
    n = 0

    def tx() -> str:
        return format_time(T0 + timedelta(milliseconds=10 * n))

    def assert_event(s: int, p: int, v: int, sup: str | None) -> AssertEvent:
        t = tx()
        fact = Fact(
            fact_id=_fid(s, p, v),
            subject=f"acct:{s}",
            predicate=PREDICATES[p],
            value={"v": v, "note": f"value {v} of {PREDICATES[p]} for acct:{s}"},
            space=SPACES[s % len(SPACES)],
            actor=f"agent-{s % 17}",
            source=Source(f"rcpt-{n:x}"),
            provenance="claimed",
            valid_from=t,
        )
        return AssertEvent(f"{n:08x}-0000-4000-8000-{n:012x}", t, fact, sup)

    def eid() -> str:
        return f"{n:08x}-0000-4000-9000-{n:012x}"

    order = list(range(subjects))
    rng.shuffle(order)
    for s in order:
        for p in range(len(PREDICATES)):
            if n >= n_events:
                return
            yield assert_event(s, p, 0, None)
            n += 1
    while n < n_events:
        rng.shuffle(order)
        for s in order:
            if n >= n_events:
                return
            p = rng.randrange(len(PREDICATES))
            c = s * len(PREDICATES) + p
            roll = rng.random()
            head = _fid(s, p, cur[c])
            if roll < 0.5 and latest[c] < 250:
                v = latest[c] + 1
                yield assert_event(s, p, v, head)
                parent[c], cur[c], latest[c], flags[c] = cur[c], v, v, 0
                n += 1
            elif roll < 0.65 and not flags[c] & 1:
                yield ConfirmEvent(eid(), tx(), head, "gateway", Source(f"rcpt-{n:x}"))
                flags[c] |= 1
                n += 1
            elif roll < 0.8 and cur[c] > 0 and not flags[c] & 2:
                yield RetractEvent(eid(), tx(), head, "agent", "wrong value", Source(None))
                cur[c], flags[c] = parent[c], 2
                n += 1
            elif n + 1 < n_events:
                yield HoldEvent(eid(), tx(), head, "legal", "case 17", Source(None))
                n += 1
                yield ReleaseEvent(eid(), tx(), head, "legal", "case closed", Source(None))
                n += 1


def _bar(total: int, desc: str) -> Any:
    if tqdm is not None:
        return tqdm(total=total, desc=desc, unit="ev", unit_scale=True, mininterval=2)

    class _Plain:
        def __init__(self) -> None:
            self.done, self.last = 0, time.monotonic()

        def update(self, k: int) -> None:
            self.done += k
            if time.monotonic() - self.last > 5:
                self.last = time.monotonic()
                print(f"{desc}: {self.done:,}/{total:,}", file=sys.stderr)

        def close(self) -> None:
            pass

    return _Plain()


def _batches(events: Iterator[Event], size: int = BATCH) -> Iterator[list[Event]]:
    batch: list[Event] = []
    for event in events:
        batch.append(event)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


# -- building ------------------------------------------------------------------------------------


def build_with_ledger(location: str, n_events: int) -> float:
    """The batch path: ``Ledger.import_events`` (store.append, executemany per 5000)."""
    bar = _bar(n_events, f"build {n_events:,} via import_events")
    start = time.perf_counter()

    def counted() -> Iterator[Event]:
        for i, event in enumerate(generate(n_events), 1):
            yield event
            if i % BATCH == 0:
                bar.update(BATCH)

    with Ledger(location) as ledger:
        ledger.import_events(counted(), batch_size=BATCH)
    bar.close()
    return time.perf_counter() - start


def build_sqlite_direct(path: Path, n_events: int) -> float:
    """Direct SQL: the SPEC table, rows from the generator, the five indexes created after."""
    start = time.perf_counter()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=OFF")
    db.execute("PRAGMA synchronous=OFF")
    db.execute("PRAGMA cache_size=-1000000")
    db.execute(f"CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, {COLUMNS_DDL})")
    sql = (
        "INSERT INTO events (event_id, kind, tx_time, fact_id, space, subject, predicate, "
        "supersedes, json) VALUES (?,?,?,?,?,?,?,?,?)"
    )
    bar = _bar(n_events, f"load {n_events:,} via direct SQL")
    for batch in _batches(generate(n_events), 50_000):
        rows = [tuple(event_row(e).values()) for e in batch]
        db.execute("BEGIN")
        db.executemany(sql, rows)
        db.execute("COMMIT")
        bar.update(len(batch))
    bar.close()
    for statement in index_ddl("events", "events", INDEXES):
        print(f"  {statement}", file=sys.stderr)
        db.execute(statement)
    db.execute("PRAGMA journal_mode=WAL")
    db.close()
    return time.perf_counter() - start


# -- measuring -----------------------------------------------------------------------------------


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


_RAW_AS_OF_SQLITE = """
SELECT a.json FROM events a
WHERE a.subject = :s AND a.kind = 'assert' AND a.tx_time <= :tx
  AND json_extract(a.json, '$.fact.validFrom') <= :va
  AND NOT EXISTS (SELECT 1 FROM events r WHERE r.fact_id = a.fact_id
                  AND r.kind IN ('retract', 'forget') AND r.tx_time <= :tx)
  AND NOT EXISTS (SELECT 1 FROM events n WHERE n.supersedes = a.fact_id AND n.tx_time <= :tx
                  AND json_extract(n.json, '$.fact.validFrom') <= :va
                  AND NOT EXISTS (SELECT 1 FROM events r2 WHERE r2.fact_id = n.fact_id
                                  AND r2.kind IN ('retract', 'forget') AND r2.tx_time <= :tx))
ORDER BY a.seq
"""

_RAW_AS_OF_PG = """
SELECT a.json FROM {t} a
WHERE a.subject = %(s)s AND a.kind = 'assert' AND a.tx_time <= %(tx)s
  AND (a.json::json #>> '{{fact,validFrom}}') <= %(va)s
  AND NOT EXISTS (SELECT 1 FROM {t} r WHERE r.fact_id = a.fact_id
                  AND r.kind IN ('retract', 'forget') AND r.tx_time <= %(tx)s)
  AND NOT EXISTS (SELECT 1 FROM {t} n WHERE n.supersedes = a.fact_id AND n.tx_time <= %(tx)s
                  AND (n.json::json #>> '{{fact,validFrom}}') <= %(va)s
                  AND NOT EXISTS (SELECT 1 FROM {t} r2 WHERE r2.fact_id = n.fact_id
                                  AND r2.kind IN ('retract', 'forget') AND r2.tx_time <= %(tx)s))
ORDER BY a.seq
"""


def _peak_rss_mb() -> float:
    """This process's peak resident set. VmHWM, not ru_maxrss: Linux carries ru_maxrss across
    exec, so a child would report its parent's peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def read_phase(location: str, n_events: int, reads: int, backend: str) -> dict[str, Any]:
    """Runs in a fresh process: open time, as-of latencies (ours and raw), peak RSS."""
    subjects = max(1, n_events // EVENTS_PER_SUBJECT)
    rng = random.Random(11)
    start = time.perf_counter()
    ledger = Ledger(location)
    open_s = time.perf_counter() - start
    now = format_time(datetime.now(UTC))
    if backend == "sqlite":
        raw = sqlite3.connect(location, isolation_level=None)
        for pragma in (
            "journal_mode=WAL",
            "synchronous=FULL",
            "secure_delete=ON",
            "cache_size=-32768",
        ):
            raw.execute(f"PRAGMA {pragma}")

        def raw_as_of(s: str) -> list[Any]:
            rows = raw.execute(_RAW_AS_OF_SQLITE, {"s": s, "tx": now, "va": now}).fetchall()
            return [json.loads(r[0]) for r in rows]
    else:
        import psycopg

        from agent_custody_state_events_postgres.location import parse_location

        where = parse_location(location)
        conn = psycopg.connect(
            where.connect_url.replace("postgresql+psycopg", "postgresql"), autocommit=True
        )
        sql = _RAW_AS_OF_PG.format(t=where.qualified)

        def raw_as_of(s: str) -> list[Any]:
            rows = conn.execute(sql, {"s": s, "tx": now, "va": now}).fetchall()
            return [json.loads(r[0]) for r in rows]

    picks = [f"acct:{rng.randrange(subjects)}" for _ in range(reads + 200)]
    mismatches = 0
    ours: list[float] = []
    base: list[float] = []
    # CPU time per call too: on a shared machine wall-clock p99 mostly measures preemption.
    ours_cpu: list[float] = []
    base_cpu: list[float] = []
    for i, subject in enumerate(picks):
        # Alternate which goes first, so neither always reads pages the other just warmed.
        order = (0, 1) if i % 2 else (1, 0)
        got: dict[int, Any] = {}
        for which in order:
            t, c = time.perf_counter(), time.process_time()
            if which == 0:
                got[0] = ledger.as_of(subject=subject, valid_at=now, tx_at=now)
                dt, dc = time.perf_counter() - t, time.process_time() - c
                if i >= 200:
                    ours.append(dt)
                    ours_cpu.append(dc)
            else:
                got[1] = raw_as_of(subject)
                dt, dc = time.perf_counter() - t, time.process_time() - c
                if i >= 200:
                    base.append(dt)
                    base_cpu.append(dc)
        if sorted(f.fact_id for f in got[0]) != sorted(r["fact"]["factId"] for r in got[1]):
            mismatches += 1
    count_t = time.perf_counter()
    count = ledger.count()
    count_s = time.perf_counter() - count_t
    ledger.close()
    return {
        "open_s": open_s,
        "as_of_p50_ms": _pct(ours, 0.5) * 1e3,
        "as_of_p99_ms": _pct(ours, 0.99) * 1e3,
        "raw_p50_ms": _pct(base, 0.5) * 1e3,
        "raw_p99_ms": _pct(base, 0.99) * 1e3,
        "as_of_mean_ms": statistics.fmean(ours) * 1e3,
        "raw_mean_ms": statistics.fmean(base) * 1e3,
        "as_of_cpu_p50_ms": _pct(ours_cpu, 0.5) * 1e3,
        "as_of_cpu_p99_ms": _pct(ours_cpu, 0.99) * 1e3,
        "raw_cpu_p50_ms": _pct(base_cpu, 0.5) * 1e3,
        "raw_cpu_p99_ms": _pct(base_cpu, 0.99) * 1e3,
        "load_average": os.getloadavg()[0],
        "answers_differ": mismatches,
        "reads": len(ours),
        "count": count,
        "count_s": count_s,
        "peak_rss_mb": _peak_rss_mb(),
    }


def appends(location: str, backend: str, n: int) -> dict[str, float]:
    """Single durable appends: the ledger's beside a raw one-row transaction."""
    with Ledger(location) as ledger:
        start = time.perf_counter()
        for i in range(n):
            ledger.assert_fact(
                subject=f"bench:append:{i}", predicate="p", value=i, space="org", actor="bench"
            )
        ours = n / (time.perf_counter() - start)
        template = AssertEvent("x", ledger.now(), Fact("f", "s", "p", 1, "org", "bench"))
    rows = []
    for i in range(n):
        e = AssertEvent(
            f"raw-append-{i}-{time.time_ns()}",
            template.tx_time,
            template.fact.with_(fact_id=f"raw-append-{i}-{time.time_ns()}"),
        )
        rows.append(event_row(e))
    cols = ", ".join(rows[0])
    if backend == "sqlite":
        raw = sqlite3.connect(location, isolation_level=None)
        for pragma in ("journal_mode=WAL", "synchronous=FULL", "secure_delete=ON"):
            raw.execute(f"PRAGMA {pragma}")
        sql = f"INSERT INTO events ({cols}) VALUES ({', '.join('?' * len(rows[0]))})"
        start = time.perf_counter()
        for row in rows:
            raw.execute("BEGIN IMMEDIATE")
            raw.execute(sql, tuple(row.values()))
            raw.execute("COMMIT")
        base = n / (time.perf_counter() - start)
        raw.close()
    else:
        base = _pg_raw_appends(location, rows)
    return {"append_per_s": ours, "raw_append_per_s": base}


def _pg_raw_appends(location: str, rows: list[dict[str, Any]]) -> float:
    import psycopg

    from agent_custody_state_events_postgres.location import parse_location

    where = parse_location(location)
    conn = psycopg.connect(
        where.connect_url.replace("postgresql+psycopg", "postgresql"), autocommit=True
    )
    cols = ", ".join(rows[0])
    sql = f"INSERT INTO {where.qualified} ({cols}) VALUES ({', '.join(['%s'] * len(rows[0]))})"
    start = time.perf_counter()
    for row in rows:
        with conn.transaction():
            conn.execute(sql, tuple(row.values()))
    rate = len(rows) / (time.perf_counter() - start)
    conn.close()
    return rate


def ingest(make_location: Callable[[str], str], backend: str, n: int) -> dict[str, float]:
    """Batched ingest into empty ledgers: import_events and assert_many beside raw executemany."""
    events = list(generate(n, seed=3))
    loc = make_location("ingest_import")
    start = time.perf_counter()
    with Ledger(loc) as ledger:
        ledger.import_events(iter(events), batch_size=BATCH)
    import_rate = n / (time.perf_counter() - start)

    items = [
        {
            "subject": f"acct:{i // 4}",
            "predicate": PREDICATES[i % 4],
            "value": {"v": i},
            "space": SPACES[i % 8],
            "actor": "bench",
            "receipt_id": f"rcpt-{i}",
        }
        for i in range(n)
    ]
    loc = make_location("ingest_many")
    start = time.perf_counter()
    with Ledger(loc) as ledger:
        for k in range(0, n, BATCH):
            ledger.assert_many(items[k : k + BATCH])
    many_rate = n / (time.perf_counter() - start)

    rows = [tuple(event_row(e).values()) for e in events]
    loc = make_location("ingest_raw")
    Ledger(loc).close()  # the same empty table with its indexes
    cols = "event_id, kind, tx_time, fact_id, space, subject, predicate, supersedes, json"
    if backend == "sqlite":
        raw = sqlite3.connect(loc, isolation_level=None)
        for pragma in ("journal_mode=WAL", "synchronous=FULL", "secure_delete=ON"):
            raw.execute(f"PRAGMA {pragma}")
        sql = f"INSERT INTO events ({cols}) VALUES (?,?,?,?,?,?,?,?,?)"
        start = time.perf_counter()
        for k in range(0, n, BATCH):
            raw.execute("BEGIN IMMEDIATE")
            raw.executemany(sql, rows[k : k + BATCH])
            raw.execute("COMMIT")
        raw_rate = n / (time.perf_counter() - start)
    else:
        import psycopg

        from agent_custody_state_events_postgres.location import parse_location

        where = parse_location(loc)
        conn = psycopg.connect(where.connect_url.replace("postgresql+psycopg", "postgresql"))
        sql = f"INSERT INTO {where.qualified} ({cols}) VALUES ({', '.join(['%s'] * 9)})"
        start = time.perf_counter()
        for k in range(0, n, BATCH):
            with conn.cursor() as cur:
                cur.executemany(sql, rows[k : k + BATCH])
            conn.commit()
        raw_rate = n / (time.perf_counter() - start)
    return {
        "import_per_s": import_rate,
        "assert_many_per_s": many_rate,
        "raw_executemany_per_s": raw_rate,
    }


# -- driver --------------------------------------------------------------------------------------


def _warm(path: str) -> None:
    """Read the file once so the OS page cache holds it, as it would for a running server
    (the same for the raw baseline and the ledger; page cache is not the reader's RSS)."""
    with open(path, "rb") as fh:
        while fh.read(1 << 24):
            pass


def _subprocess_read(location: str, n_events: int, reads: int, backend: str) -> dict[str, Any]:
    if backend == "sqlite":
        _warm(location)
    out = subprocess.run(
        [sys.executable, __file__, "--phase-read", location, str(n_events), str(reads), backend],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _row(name: str, ours: float, base: float | None, unit: str, target: str) -> str:
    ratio = f"{ours / base:.2f}x" if base else "-"
    base_s = f"{base:,.3f}" if base is not None else "-"
    return f"| {name} | {ours:,.3f} {unit} | {base_s} | {ratio} | {target} |"


def report(size: int, backend: str, r: dict[str, Any]) -> str:
    lines = [
        f"### {backend}, {size:,} events (build {r['build_s']:.0f} s, {r['build_method']})",
        "",
        "| figure | ours | baseline (raw, same run) | ours/baseline | target |",
        "| --- | --- | --- | --- | --- |",
        _row("as-of by subject p50", r["as_of_p50_ms"], r["raw_p50_ms"], "ms", ""),
        _row("as-of by subject p99", r["as_of_p99_ms"], r["raw_p99_ms"], "ms", "< 1 ms, <= 3x raw"),
        _row(
            "as-of by subject, CPU time p50", r["as_of_cpu_p50_ms"], r["raw_cpu_p50_ms"], "ms", ""
        ),
        _row(
            "as-of by subject, CPU time p99", r["as_of_cpu_p99_ms"], r["raw_cpu_p99_ms"], "ms", ""
        ),
        _row(
            "single durable append", r["append_per_s"], r["raw_append_per_s"], "/s", ">= 0.6x raw"
        ),
        _row(
            "batched ingest (import_events)",
            r["import_per_s"],
            r["raw_executemany_per_s"],
            "/s",
            ">= 40,000/s",
        ),
        _row(
            "batched ingest (assert_many)",
            r["assert_many_per_s"],
            r["raw_executemany_per_s"],
            "/s",
            ">= 40,000/s",
        ),
        _row("open", r["open_s"] * 1e3, None, "ms", "< 1000 ms"),
        _row("peak RSS while reading", r["peak_rss_mb"], None, "MB", "< 300 MB"),
        _row("count()", r["count_s"] * 1e3, None, "ms", ""),
        "",
        f"load average during the reads: {r['load_average']:.1f} on {os.cpu_count()} CPUs. "
        f"{r['reads']} reads; answers that differed between ledger and raw SQL: "
        f"{r['answers_differ']} (the raw query skips only retracted middle links).",
    ]
    return "\n".join(lines)


def run(size: int, backend: str, workdir: Path, args: argparse.Namespace, pg: Any) -> str:
    def make_location(name: str) -> str:
        if backend == "sqlite":
            path = workdir / f"{name}-{size}.sqlite"
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            return str(path)
        db = f"b_{name}_{size}"
        pg.drop_database(db)
        return pg.create_database(db)

    result: dict[str, Any] = {"events": size, "backend": backend}
    if backend == "sqlite":
        location = str(workdir / f"ledger-{size}.sqlite")
        if args.keep and Path(location).exists():
            result.update(build_s=0.0, build_method="reused")
        else:
            Path(location).unlink(missing_ok=True)
            if size > 2_000_000:
                result.update(
                    build_s=build_sqlite_direct(Path(location), size),
                    build_method="direct SQL, indexes after",
                )
            else:
                result.update(
                    build_s=build_with_ledger(location, size),
                    build_method="Ledger.import_events batches of 5000",
                )
    else:
        location = make_location("ledger")
        result.update(
            build_s=build_with_ledger(location, size),
            build_method="Ledger.import_events batches of 5000",
        )
    if args.build_only:
        return f"built {location} in {result['build_s']:.0f} s ({result['build_method']})"
    print(f"reading {size:,} ...", file=sys.stderr)
    result.update(_subprocess_read(location, size, args.reads, backend))
    print("appending ...", file=sys.stderr)
    result.update(appends(location, backend, args.appends))
    print("ingesting ...", file=sys.stderr)
    result.update(ingest(make_location, backend, args.ingest))
    OUT.mkdir(exist_ok=True)
    (OUT / f"backends-{backend}-{size}.json").write_text(json.dumps(result, indent=2))
    return report(size, backend, result)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--phase-read":
        location, n, reads, backend = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
        print(json.dumps(read_phase(location, n, reads, backend)))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--backend", nargs="+", default=["sqlite"], choices=["sqlite", "postgres"])
    parser.add_argument("--dir", type=Path, default=None, help="where ledgers are built")
    parser.add_argument("--reads", type=int, default=3000)
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--ingest", type=int, default=100_000)
    parser.add_argument("--keep", action="store_true", help="reuse a built SQLite ledger")
    parser.add_argument(
        "--build-only", action="store_true", help="build the ledgers, measure nothing"
    )
    args = parser.parse_args()
    workdir = args.dir or Path(tempfile.gettempdir()) / "acs-bench"
    workdir.mkdir(parents=True, exist_ok=True)
    pg = None
    if "postgres" in args.backend:
        from agent_custody_state_conformance.postgres import start_embedded_postgres

        base = Path(tempfile.mkdtemp(prefix="acs-bench-pg-"))
        os.chmod(base, 0o755)
        pg = start_embedded_postgres(base)
    try:
        for backend in args.backend:
            for size in args.events:
                text = run(size, backend, workdir, args, pg)
                print(text + "\n", flush=True)
    finally:
        if pg is not None:
            pg.stop()


if __name__ == "__main__":
    main()

"""The event-backend figures, each beside its raw baseline measured in the same run: as-of
reads by subject (in a fresh process: open time, latencies, peak RSS), single durable appends
and batched ingest.
"""

from __future__ import annotations

import json
import os
import random
import resource
import sqlite3
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent_custody_state import Ledger
from agent_custody_state.ledger.model import AssertEvent, Fact
from agent_custody_state.timeutil import format_time
from agent_custody_state_sql.schema import event_row

from .history import BATCH, EVENTS_PER_SUBJECT, PREDICATES, SPACES, generate

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

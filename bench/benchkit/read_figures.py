"""The read figures of ``bench_reads.py``, measured in a fresh process: open time, as-of,
``history`` and ``get`` beside their raw queries (wall and CPU time per call), peak RSS.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from agent_custody_state import Ledger
from agent_custody_state.timeutil import format_time

from .backend_figures import _RAW_AS_OF_PG, _RAW_AS_OF_SQLITE, _pct, _peak_rss_mb
from .history import EVENTS_PER_SUBJECT, PREDICATES, _fid

FIGURES = ("as_of", "history", "get")
WARMUP = 200


def _raw_runner(ledger: Ledger, location: str) -> Callable[[str, Any], list[Any]]:
    """``run(sql, params)`` on a raw driver connection of the same database: rows parsed."""
    if ledger.backend.kind == "sqlite":
        raw = sqlite3.connect(location, isolation_level=None)
        for pragma in ("journal_mode=WAL", "synchronous=FULL", "cache_size=-32768"):
            raw.execute(f"PRAGMA {pragma}")

        def run_sqlite(sql: str, params: Any) -> list[Any]:
            return [json.loads(r[-1]) for r in raw.execute(sql, params).fetchall()]

        return run_sqlite
    import psycopg

    from agent_custody_state_events_postgres.location import parse_location

    where = parse_location(location)
    conn = psycopg.connect(
        where.connect_url.replace("postgresql+psycopg", "postgresql"), autocommit=True
    )

    def run_pg(sql: str, params: Any) -> list[Any]:
        return [json.loads(r[-1]) for r in conn.execute(sql, params).fetchall()]

    return run_pg


def _stats(wall: list[float], cpu: list[float]) -> dict[str, float]:
    return {
        "p50": _pct(wall, 0.5) * 1e3,
        "p99": _pct(wall, 0.99) * 1e3,
        "cpu_p50": _pct(cpu, 0.5) * 1e3,
        "cpu_p99": _pct(cpu, 0.99) * 1e3,
    }


def read_phase(location: str, n_events: int, reads: int) -> dict[str, Any]:
    """Open the ledger, then time each read and its raw query in turns; see ``bench_reads``."""
    start = time.perf_counter()
    ledger = Ledger(location)
    open_s = time.perf_counter() - start
    backend: Any = ledger.backend
    run = _raw_runner(ledger, location)
    now = format_time(datetime.now(UTC))
    pg = backend.kind == "postgres"
    as_of_sql = _RAW_AS_OF_PG.format(t=backend.where.qualified) if pg else _RAW_AS_OF_SQLITE
    q = backend._q  # the statements the backend runs for history and get

    def raw_history(fid: str) -> list[Any]:
        return run(q.history.sql, q.history.args({"f": fid, "f2": fid}))

    def raw_get(fid: str) -> list[Any]:
        return run(q.events_around.sql, q.events_around.args({"ids": backend._ids_param([fid])}))

    subjects = max(1, n_events // EVENTS_PER_SUBJECT)
    rng = random.Random(11)
    picks = [(rng.randrange(subjects), rng.randrange(len(PREDICATES))) for _ in range(reads)]
    picks = picks[:WARMUP] + picks  # the first WARMUP are not counted
    pairs: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
        "as_of": (
            lambda s: ledger.as_of(subject=f"acct:{s}", valid_at=now, tx_at=now),
            lambda s: run(as_of_sql, {"s": f"acct:{s}", "tx": now, "va": now}),
        ),
        "history": (ledger.history, raw_history),
        "get": (ledger.get, raw_get),
    }
    keys = [m + k for m in ("", "raw_") for k in FIGURES]
    wall: dict[str, list[float]] = {k: [] for k in keys}
    cpu: dict[str, list[float]] = {k: [] for k in keys}
    differ = 0
    for i, (s, p) in enumerate(picks):
        fid = _fid(s, p, 0)
        for name in FIGURES:
            arg = s if name == "as_of" else fid
            got: dict[str, Any] = {}
            for which in ("", "raw_") if i % 2 else ("raw_", ""):
                fn = pairs[name][0 if which == "" else 1]
                t, c = time.perf_counter(), time.process_time()
                got[which] = fn(arg)
                dt, dc = time.perf_counter() - t, time.process_time() - c
                if i >= WARMUP:
                    wall[which + name].append(dt)
                    cpu[which + name].append(dc)
            differ += not _same(name, got[""], got["raw_"])
    ledger.close()
    out: dict[str, Any] = {k: _stats(wall[k], cpu[k]) for k in wall}
    out.update(
        open_s=open_s,
        reads=reads,
        differ=differ,
        load_average=os.getloadavg()[0],
        peak_rss_mb=_peak_rss_mb(),
    )
    return out


def _same(name: str, ours: Any, raw: list[Any]) -> bool:
    """Whether our answer and the raw query's name the same facts or events. The raw as-of
    skips only retracted middle links, so it may differ where a chain was retracted twice."""
    if name == "as_of":
        return sorted(f.fact_id for f in ours) == sorted(r["fact"]["factId"] for r in raw)
    if name == "history":
        return [e.event_id for e in ours] == [r["eventId"] for r in raw]
    return ours is not None and any(r.get("fact", {}).get("factId") == ours.fact_id for r in raw)

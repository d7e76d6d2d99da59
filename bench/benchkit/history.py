"""The generated ledger history of the event-backend benchmark and the two ways to build a
ledger from it: through the ledger's batch path (``import_events``) or, for the largest sizes,
by direct SQL into the SPEC table with the indexes created after the load.
"""

from __future__ import annotations

import random
import sqlite3
import sys
import time
from collections.abc import Iterator
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

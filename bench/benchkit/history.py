"""The generated ledger history of the event-backend benchmark and the two ways to build a
ledger from it: through the ledger's batch path (``import_events``) or, for the largest sizes,
by direct SQL into the SPEC table with the indexes created after the load.
"""

from __future__ import annotations

import itertools
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
from agent_custody_state_sql.schema import (
    INDEXES,
    ROW_COLUMNS,
    create_ddl,
    event_values,
    index_ddl,
)

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


def _plan(n_events: int, seed: int) -> Iterator[tuple[str, int, int, int, int | None]]:
    """The history as ``(kind, s, p, v, sup)`` per event, in order: subject ``s``, predicate
    ``p``; for an assert its version ``v`` and the version it supersedes (``None`` for none),
    for any other kind the version of the fact it cites in ``v``.

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
    order = list(range(subjects))
    rng.shuffle(order)
    for s in order:
        for p in range(len(PREDICATES)):
            if n >= n_events:
                return
            yield "assert", s, p, 0, None
            n += 1
    while n < n_events:
        rng.shuffle(order)
        for s in order:
            if n >= n_events:
                return
            p = rng.randrange(len(PREDICATES))
            c = s * len(PREDICATES) + p
            roll = rng.random()
            if roll < 0.5 and latest[c] < 250:
                v = latest[c] + 1
                yield "assert", s, p, v, cur[c]
                parent[c], cur[c], latest[c], flags[c] = cur[c], v, v, 0
                n += 1
            elif roll < 0.65 and not flags[c] & 1:
                yield "confirm", s, p, cur[c], None
                flags[c] |= 1
                n += 1
            elif roll < 0.8 and cur[c] > 0 and not flags[c] & 2:
                yield "retract", s, p, cur[c], None
                cur[c], flags[c] = parent[c], 2
                n += 1
            elif n + 1 < n_events:
                yield "hold", s, p, cur[c], None
                yield "release", s, p, cur[c], None
                n += 2


def _tx(n: int) -> str:
    return format_time(T0 + timedelta(milliseconds=10 * n))


def _eid(n: int) -> str:
    return f"{n:08x}-0000-4000-9000-{n:012x}"


def generate(n_events: int, seed: int = 7) -> Iterator[Event]:
    """A valid history of exactly ``n_events`` events, deterministic for a seed (``_plan``)."""
    for n, (kind, s, p, v, sup) in enumerate(_plan(n_events, seed)):
        t = _tx(n)
        head = _fid(s, p, v)
        if kind == "assert":
            fact = Fact(
                fact_id=head,
                subject=f"acct:{s}",
                predicate=PREDICATES[p],
                value={"v": v, "note": f"value {v} of {PREDICATES[p]} for acct:{s}"},
                space=SPACES[s % len(SPACES)],
                actor=f"agent-{s % 17}",
                source=Source(f"rcpt-{n:x}"),
                provenance="claimed",
                valid_from=t,
            )
            superseded = None if sup is None else _fid(s, p, sup)
            yield AssertEvent(f"{n:08x}-0000-4000-8000-{n:012x}", t, fact, superseded)
        elif kind == "confirm":
            yield ConfirmEvent(_eid(n), t, head, "gateway", Source(f"rcpt-{n:x}"))
        elif kind == "retract":
            yield RetractEvent(_eid(n), t, head, "agent", "wrong value", Source(None))
        elif kind == "hold":
            yield HoldEvent(_eid(n), t, head, "legal", "case 17", Source(None))
        else:
            yield ReleaseEvent(_eid(n), t, head, "legal", "case closed", Source(None))


_ACTIONS = {
    "retract": ("agent", "wrong value"),
    "hold": ("legal", "case 17"),
    "release": ("legal", "case closed"),
}


def stored_rows(n_events: int, seed: int = 7) -> Iterator[tuple[Any, ...]]:
    """``event_values(e)`` for each event of ``generate(n_events, seed)``, written straight
    from the plan as text (no event objects, no encoder: several times faster). Exactly the
    ledger's rows: ``check_rows`` compares them with the ledger's own encoding."""
    second = -1
    stamp = ""
    for n, (kind, s, p, v, sup) in enumerate(_plan(n_events, seed)):
        if (n // 100) != second:  # one time string per second of the history (10 ms steps)
            second = n // 100
            stamp = _tx(second * 100)[:20]
        t = f"{stamp}{(n % 100) * 10:03d}Z"
        head = _fid(s, p, v)
        if kind == "assert":
            pred, space = PREDICATES[p], SPACES[s % len(SPACES)]
            superseded = None if sup is None else _fid(s, p, sup)
            eid = f"{n:08x}-0000-4000-8000-{n:012x}"
            json_sup = "null" if superseded is None else f'"{superseded}"'
            text = (
                f'{{"eventId":"{eid}","kind":"assert","txTime":"{t}","fact":{{"factId":"{head}",'
                f'"subject":"acct:{s}","predicate":"{pred}","value":{{"v":{v},"note":"value {v} '
                f'of {pred} for acct:{s}"}},"space":"{space}","actor":"agent-{s % 17}",'
                f'"source":{{"receiptId":"rcpt-{n:x}"}},"provenance":"claimed","validFrom":"{t}",'
                f'"validTo":null,"confidence":null}},"supersedes":{json_sup}}}'
            )
            yield eid, "assert", t, head, space, f"acct:{s}", pred, superseded, text
            continue
        eid = _eid(n)
        start = f'{{"eventId":"{eid}","kind":"{kind}","txTime":"{t}","factId":"{head}",'
        if kind == "confirm":
            text = f'{start}"actor":"gateway","source":{{"receiptId":"rcpt-{n:x}"}}}}'
        else:
            actor, why = _ACTIONS[kind]
            text = f'{start}"actor":"{actor}","reason":"{why}","source":{{"receiptId":null}}}}'
        yield eid, kind, t, head, None, None, None, None, text


def check_rows(n_events: int, seed: int = 7) -> None:
    """Raise unless ``stored_rows`` equals the ledger's own rows (``event_values``) for the first
    ``n_events`` events (a build checks this before it writes anything)."""
    pairs = zip(stored_rows(n_events, seed), generate(n_events, seed), strict=True)
    for i, (fast, event) in enumerate(pairs):
        if fast != event_values(event):
            raise AssertionError(
                f"stored_rows differs at event {i}: {fast} != {event_values(event)}"
            )


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


def _batches(rows: Iterator[Any], size: int) -> Iterator[list[Any]]:
    while batch := list(itertools.islice(rows, size)):
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


def build_sqlite_direct(path: Path, n_events: int, seed: int = 7) -> float:
    """Direct SQL: the SPEC table, ``stored_rows`` inserted with a raw ``executemany`` (no
    journal, no fsync), the five indexes created after; then WAL, as the ledger keeps it."""
    start = time.perf_counter()
    check_rows(min(n_events, 20_000), seed)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=OFF")
    db.execute("PRAGMA synchronous=OFF")
    db.execute("PRAGMA cache_size=-1000000")
    db.execute(create_ddl("events", "events", "INTEGER PRIMARY KEY AUTOINCREMENT")[0])
    sql = f"INSERT INTO events ({', '.join(ROW_COLUMNS)}) VALUES ({', '.join('?' * 9)})"
    bar = _bar(n_events, f"load {n_events:,} via direct SQL")
    for batch in _batches(stored_rows(n_events, seed), 100_000):
        db.execute("BEGIN")
        db.executemany(sql, batch)
        db.execute("COMMIT")
        bar.update(len(batch))
    bar.close()
    for statement in index_ddl("events", "events", INDEXES):
        print(f"  {statement}", file=sys.stderr)
        db.execute(statement)
    db.execute("ANALYZE")
    db.execute("PRAGMA journal_mode=WAL")
    db.close()
    return time.perf_counter() - start


def build_postgres_direct(location: str, n_events: int, seed: int = 7) -> float:
    """Direct SQL into a PostgreSQL ledger: the ledger creates its table, its five indexes
    are dropped, ``stored_rows`` go in with ``COPY``, the indexes are made again, ``ANALYZE``."""
    import psycopg

    from agent_custody_state_events_postgres.location import parse_location

    start = time.perf_counter()
    check_rows(min(n_events, 20_000), seed)
    Ledger(location).close()
    where = parse_location(location)
    prefix = where.qualified.replace(".", "_")
    conn = psycopg.connect(where.connect_url.replace("postgresql+psycopg", "postgresql"))
    for suffix in INDEXES:
        conn.execute(f"DROP INDEX IF EXISTS {prefix}_{suffix}")
    bar = _bar(n_events, f"load {n_events:,} via COPY")
    sql = f"COPY {where.qualified} ({', '.join(ROW_COLUMNS)}) FROM STDIN"
    for batch in _batches(stored_rows(n_events, seed), 100_000):
        with conn.cursor() as cur, cur.copy(sql) as copy:
            for row in batch:
                copy.write_row(row)
        conn.commit()
        bar.update(len(batch))
    bar.close()
    for statement in index_ddl(where.qualified, prefix, INDEXES):
        print(f"  {statement}", file=sys.stderr)
        conn.execute(statement)
    conn.commit()
    conn.autocommit = True
    conn.execute(f"VACUUM ANALYZE {where.qualified}")
    conn.close()
    return time.perf_counter() - start

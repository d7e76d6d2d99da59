"""Concurrency review: real processes fighting over the same few facts of one SQLite file.

Each worker process supersedes, retracts, holds, releases and forgets facts of a small pool
while the test process polls the table by ``seq`` in autocommit mode, as an export or a page
reader would. Afterwards:

* the committed history, replayed in ``seq`` order, obeys every rule (a fact superseded at
  most once while its superseder stands, retracted once, held once, forgotten once, never
  forgotten on hold), so no two writers both won a race;
* every forgotten assert row has its forget event, and no forgotten fact has a value left;
* transaction time never goes backwards along ``seq``, the chain verifies, and the poller
  never saw a row commit below a ``seq`` it had already passed.
"""

from __future__ import annotations

import multiprocessing as mp
import random
import sqlite3
import time
import traceback
from typing import Any

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.ledger.model import AssertEvent, Event
from agent_custody_state.ledger.verify import verify_lines

WORKERS = 4
ROUNDS = 60


def _work(location: str, name: str, seed: int, barrier: Any, out: Any) -> None:
    try:
        rng = random.Random(seed)
        with Ledger(location) as ledger:
            barrier.wait(60)
            for i in range(ROUNDS):
                facts = ledger.facts()
                fact = rng.choice(facts) if facts else None
                op = rng.choice(["supersede", "supersede", "retract", "hold", "release", "forget"])
                try:
                    if fact is None or rng.random() < 0.1:
                        ledger.assert_fact(
                            subject=f"s{rng.randrange(3)}", predicate="p", value=f"{name}{i}",
                            space="race", actor=name,
                        )  # fmt: skip
                    elif op == "supersede":
                        ledger.assert_fact(
                            subject=fact.subject, predicate="p", value=f"{name}{i}",
                            space="race", actor=name, supersedes=fact.fact_id,
                        )  # fmt: skip
                    elif op == "retract":
                        ledger.retract(fact_id=fact.fact_id, actor=name, reason="r")
                    elif op == "hold":
                        ledger.hold(fact_id=fact.fact_id, actor=name, reason="h")
                    elif op == "release":
                        ledger.release(fact_id=fact.fact_id, actor=name, reason="h")
                    else:
                        ledger.forget(fact_id=fact.fact_id, actor=name, reason="f")
                except LedgerError:
                    pass  # a refusal: another writer got there first, or the state forbids it
        out.put(("ok", name))
    except BaseException:
        out.put(("error", traceback.format_exc()))


def _superseded(fact_id: str, supers: dict[str, list[str]], retracted: set[str]) -> bool:
    """Whether ``fact_id`` has an effective superseder (walking through retracted links)."""
    return any(
        s not in retracted or _superseded(s, supers, retracted) for s in supers.get(fact_id, [])
    )


def replay_problems(events: list[Event]) -> list[str]:
    """What the committed history breaks, replayed in append order."""
    asserts: dict[str, AssertEvent] = {}
    supers: dict[str, list[str]] = {}
    retracted: set[str] = set()
    held: set[str] = set()
    forgotten: set[str] = set()
    problems: list[str] = []
    for e in events:
        fid = getattr(e, "fact_id", None)
        if isinstance(e, AssertEvent):
            if fid in asserts:
                problems.append(f"{fid} asserted twice")
            sup = e.supersedes
            if sup is not None:
                if sup in retracted:
                    problems.append(f"{fid} supersedes retracted {sup}")
                if _superseded(sup, supers, retracted):
                    problems.append(f"{fid} supersedes {sup}, already superseded")
                supers.setdefault(sup, []).append(e.fact_id)
            asserts[e.fact_id] = e
        elif e.kind == "retract":
            if fid in retracted:
                problems.append(f"{fid} retracted twice (or after its forget)")
            retracted.add(str(fid))
        elif e.kind == "hold":
            if fid in held or fid in forgotten:
                problems.append(f"{fid} held while held or forgotten")
            held.add(str(fid))
        elif e.kind == "release":
            if fid not in held:
                problems.append(f"{fid} released while not held")
            held.discard(str(fid))
        elif e.kind == "forget":
            if fid in held or fid in forgotten:
                problems.append(f"{fid} forgotten while held or forgotten")
            forgotten.add(str(fid))
            retracted.add(str(fid))  # a forgotten fact counts as retracted (queries.states_from)
    for fid, a in asserts.items():
        gone = a.fact.forgotten is not None
        if gone != (fid in forgotten):
            problems.append(f"{fid}: forgotten marker {gone}, forget event {fid in forgotten}")
        if gone and a.fact.value is not None:
            problems.append(f"{fid}: forgotten but its value is left")
    return problems


def test_racing_writers_keep_every_rule(tmp_path: Any) -> None:
    location = str(tmp_path / "races.sqlite")
    with Ledger(location) as ledger:
        for s in range(3):
            ledger.assert_fact(subject=f"s{s}", predicate="p", value=0, space="race", actor="t")
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(WORKERS + 1), ctx.Queue()
    procs = [
        ctx.Process(target=_work, args=(location, f"w{n}", n, barrier, out), daemon=True)
        for n in range(WORKERS)
    ]
    for p in procs:
        p.start()
    seen: set[int] = set()
    late: set[int] = set()
    conn = sqlite3.connect(location, isolation_level=None)
    try:
        barrier.wait(60)
        deadline = time.monotonic() + 240
        while any(p.is_alive() for p in procs) and time.monotonic() < deadline:
            top = max(seen, default=0)
            rows = conn.execute("SELECT seq FROM events ORDER BY seq").fetchall()
            late |= {r[0] for r in rows if r[0] < top and r[0] not in seen}
            seen |= {r[0] for r in rows}
            time.sleep(0.002)
    finally:
        conn.close()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(10)
    assert all(status == "ok" for status, _ in results), results
    assert not late, f"rows committed below a seq a reader had passed: {sorted(late)[:10]}"
    with Ledger(location) as ledger:
        events = list(ledger.export())
        assert verify_lines(ledger.backend.stored_events()).ok
    assert replay_problems(events) == []
    times = [e.tx_time for e in events]
    assert times == sorted(times), "transaction time goes backwards along seq"

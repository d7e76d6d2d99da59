"""Racing writer processes over a few shared facts (``MultiProcessConformance`` rule MP-5).

Each worker process supersedes, retracts, holds, releases and forgets facts of a small pool at
random, while the test process reads the ledger's events in order again and again, as an export
or a page reader would. Afterwards:

* the committed history, replayed in append order, obeys every rule (a fact superseded at most
  once while its superseder stands, retracted once, held once, forgotten once, never forgotten
  on hold), so no two writers both won a race (``replay_problems``);
* every forgotten assert has its forget event, and no forgotten fact has a value left;
* transaction time never goes backwards along the append order, the chain verifies, and every
  read in order extended the one before it (no event committed behind a reader's position).
"""

from __future__ import annotations

import multiprocessing as mp
import random
import time
import traceback
from typing import Any

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.ledger.model import AssertEvent, Event
from agent_custody_state.ledger.verify import verify_lines

WORKERS = 4
ROUNDS = 60


def race_worker(location: str, name: str, seed: int, barrier: Any, out: Any) -> None:
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


def run_races(location: str, workers: int = WORKERS) -> None:
    """Race ``workers`` processes on ``location`` and check what they leave (module docstring);
    raises ``AssertionError`` naming the first problem."""
    with Ledger(location) as ledger:
        for s in range(3):
            ledger.assert_fact(subject=f"s{s}", predicate="p", value=0, space="race", actor="t")
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(workers + 1), ctx.Queue()
    procs = [
        ctx.Process(target=race_worker, args=(location, f"w{n}", n, barrier, out), daemon=True)
        for n in range(workers)
    ]
    for p in procs:
        p.start()
    behind: list[str] = []
    with Ledger(location) as reader:
        barrier.wait(60)
        seen: list[str] = []
        deadline = time.monotonic() + 240
        while any(p.is_alive() for p in procs) and time.monotonic() < deadline:
            now = [e.event_id for e in reader.export()]
            if now[: len(seen)] != seen:  # an event committed behind what was read before
                behind.append(next(a for a, b in zip(now, seen, strict=False) if a != b))
            seen = now
            time.sleep(0.002)
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(10)
    assert all(status == "ok" for status, _ in results), results
    assert not behind, f"events committed behind a reader's position: {behind[:5]}"
    with Ledger(location) as ledger:
        events = list(ledger.export())
        assert verify_lines(ledger.backend.stored_events()).ok
    assert replay_problems(events) == []
    times = [e.tx_time for e in events]
    assert times == sorted(times), "transaction time goes backwards along the append order"

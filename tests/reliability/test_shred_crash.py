"""Crash loops over the key store (issue 12, item 2): kill at every write point in crypto-shred mode.

The loop of ``test_crash_loops`` (the same zygote, random operations and kill plans: the
LD_PRELOAD shim kills at the k-th write, sync or rename of one operation, or a timer kills
anywhere), with the worker's ledger in crypto-shred mode (``shred_worker.py``). The kill points
now include the key store's own writes: a block of new keys (assert), the doom intent, the
forget's commit and the key's destruction (forget, sweep).

After every kill the ledger is reopened in crypto-shred mode (which settles what the kill left)
and, besides every promise ``test_crash_loops.check`` verifies (acknowledged events present and
unchanged, batches whole, forgets complete, the value of every fact without a forget equal to
the value written, which needs its key):

* **no key lost for a live fact**: every stored envelope of a fact without a forget opens;
* **no key left for a forgotten one**: the key id of every fact with a forget event (each was
  reported by a worker while the fact was live) is absent from the key store, and no intent is
  left pending;
* **no plaintext on disk**: no byte of any value written, live or forgotten, in the ledger's
  folder (events and key store) or, for PostgreSQL, anywhere in the data directory including
  ``pg_wal`` (checked once at the end).
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.envelope import kid_of
from agent_custody_state.ledger.model import AssertEvent, ForgetEvent
from agent_custody_state.ledger.shred import ShreddingBackend

from .support import files_under, record, run_planned, scale, scan
from .test_crash_loops import (
    Backend,
    Knowledge,
    Zygote,
    check,
    plans,
    where_killed,
)

SHRED = {"forget_mode": "crypto-shred"}


def check_keys(ledger: Ledger, kids: dict[str, str]) -> dict[str, int]:
    """The key store's promises after a crash and reopen; returns counts for the figures."""
    backend = ledger.backend
    assert isinstance(backend, ShreddingBackend)
    keys = backend.keys
    assert keys.doomed() == {}, f"intents left after recovery: {keys.doomed()}"
    raw = list(backend.inner.iter_events())
    forgotten = {e.fact_id for e in raw if isinstance(e, ForgetEvent)}
    live = {
        e.fact_id: kid
        for e in raw
        if isinstance(e, AssertEvent) and (kid := kid_of(e.fact.value)) is not None
    }
    assert not set(live) & forgotten, "a forgotten fact still has its envelope"
    present = keys.get(list(live.values()))
    lost = [fid for fid, kid in live.items() if kid not in present]
    assert not lost, f"keys lost for live facts: {lost[:3]}"
    shredded = [kids[fid] for fid in forgotten if fid in kids]
    left = keys.get(shredded)
    assert not left, f"keys left for forgotten facts: {sorted(left)[:3]}"
    unknown = sorted(forgotten - set(kids))
    assert not unknown, f"forgotten facts whose key id no worker reported: {unknown[:3]}"
    return {"live_keys": len(present), "destroyed_keys_checked": len(shredded)}


def shred_loop(
    kind: str, tmp_path: Path, faultshim: Path | None, pg: Any = None, pg_url: str | None = None
) -> None:
    kills_wanted = scale(12, 200)
    rng = random.Random(int(os.environ.get("AGENT_CUSTODY_SEED", "11")) + hash(kind) % 1000)
    backend = Backend(kind, tmp_path, pg, pg_url)
    ack = tmp_path / "acks.jsonl"
    zygote = Zygote(faultshim, tmp_path / "zygote.log", script="shred_worker.py")
    known = Knowledge()
    kids: dict[str, str] = {}
    kills: Counter[str] = Counter()
    figures: dict[str, int] = {}
    started = time.monotonic()
    try:
        plan_iter = plans(kind, rng, zygote.shim)
        while sum(kills.values()) < kills_wanted:
            plan = next(plan_iter)
            params = {
                "location": backend.location,
                "ack": str(ack),
                "seed": rng.randrange(2**32),
                "kill": plan,
                "options": SHRED,
            }
            status, lines = run_planned(zygote, plan, params, known, ack, tmp_path)
            for line in lines:
                if line["t"] == "kids":
                    kids.update(line["kids"])
            if status["signal"] != signal.SIGKILL:
                assert status["code"] == 0, f"worker failed ({status}); see zygote.log"
                continue
            kills[where_killed(lines)] += 1
            with Ledger(backend.location, **SHRED) as ledger:
                figures = check(ledger, known, backend) | check_keys(ledger, kids)
            needles = [n for ns in known.needles.values() for n in ns]
            if kind != "postgres":
                hits = scan(files_under(backend.dir), needles)
                assert not hits, f"plaintext on disk in crypto-shred mode: {hits}"
    finally:
        zygote.close()
    needles = [n for ns in known.needles.values() for n in ns]
    where = backend.dir if pg is None else pg.data_dir  # for PostgreSQL: pg_wal included
    if pg is not None:
        pg.checkpoint()
    files = files_under(where)
    hits = scan(files, needles)
    assert not hits, f"plaintext on disk in crypto-shred mode: {hits}"
    record(
        f"shred_crash_loop[{kind}]",
        kill_points=sum(kills.values()),
        by_operation=dict(sorted(kills.items())),
        acknowledged_events=len(known.acked),
        live_keys=figures.get("live_keys", 0),
        destroyed_keys_checked=figures.get("destroyed_keys_checked", 0),
        keys_lost=0,
        keys_left=0,
        files_scanned=len(files),
        needles=len(needles),
        plaintext_found=0,
        shim=zygote.shim,
        seconds=round(time.monotonic() - started, 1),
    )
    if os.environ.get("AGENT_CUSTODY_STRESS") == "1":
        for op in ("forget", "sweep", "assert", "many"):
            assert kills[op] > 0, f"no kill point landed in {op}: {dict(kills)}"


def test_shred_crash_loop_jsonl(tmp_path: Path, faultshim: Path | None) -> None:
    shred_loop("jsonl", tmp_path, faultshim)


def test_shred_crash_loop_sqlite(tmp_path: Path, faultshim: Path | None) -> None:
    pytest.importorskip("agent_custody_state_events_sqlite", reason="events-sqlite not installed")
    shred_loop("sqlite", tmp_path, faultshim)


@pytest.mark.postgres
def test_shred_crash_loop_postgres(
    tmp_path: Path, faultshim: Path | None, embedded_postgres: Any, postgres_url: str
) -> None:
    pytest.importorskip(
        "agent_custody_state_events_postgres", reason="events-postgres not installed"
    )
    keys_db = postgres_url.split("@/", 1)[1].split("?", 1)[0] + "_keys"
    embedded_postgres.create_database(keys_db)  # the default key store's database
    try:
        shred_loop("postgres", tmp_path, faultshim, embedded_postgres, postgres_url)
    finally:
        embedded_postgres.drop_database(keys_db)

"""Erasure proof (issue 7, item 6): after forget and sweep, no byte of a value in ledger files.

Values of many shapes (strings, 15-digit numbers, nested JSON, unicode, lists), each carrying a
fresh random marker so that neither compression nor a short value can fool the scan. Some facts
are forgotten one by one (after supersessions, retractions, confirmations, holds released),
others are swept by space; a few are kept as **controls**: their bytes must be found by the very
same scans, which proves each scan can see what it looks for.

The **ledger files** are scanned byte for byte: the JSONL file (and every sidecar in its folder);
the SQLite database, ``-wal`` and ``-shm``, while the ledger is still open and after it is closed;
the PostgreSQL data directory outside ``pg_wal`` after a checkpoint and a WAL rotation. The same
proof through the server and every write-through store: ``test_erasure_stores.py``.
"""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent_custody_state import Ledger

from .crash_ops import make_value
from .erasure_support import Facts
from .support import files_under, record, scale, scan


def fill(ledger: Ledger, rng: random.Random, n: int, facts: Facts) -> str:
    """Write ``n`` facts in every state; forget half one by one; return the space to sweep."""
    sweep_space = f"retention-{uuid.uuid4().hex[:8]}"
    to_forget: list[str] = []
    for i in range(n):
        value, hexes = make_value(rng)
        needles = [bytes.fromhex(h) for h in hexes]
        kind = i % 5
        space = sweep_space if i % 2 else "org"
        event = ledger.assert_fact(
            subject=f"subj-{i}",
            predicate="p",
            value=value,
            space=space,
            actor="a",
            provenance="claimed",
        )
        fid = event.fact_id
        if kind == 1:  # superseded: the old value must go too when it is forgotten
            nxt, more = make_value(rng)
            newer = ledger.assert_fact(
                subject=f"subj-{i}",
                predicate="p",
                value=nxt,
                space=space,
                actor="a",
                supersedes=fid,
            )
            facts.erased[newer.fact_id] = [bytes.fromhex(h) for h in more]
            if space == "org":
                to_forget.append(newer.fact_id)
        elif kind == 2:
            ledger.retract(fact_id=fid, actor="a", reason="wrong")
        elif kind == 3:
            ledger.confirm(fact_id=fid, actor="a")
        elif kind == 4:
            ledger.hold(fact_id=fid, actor="a", reason="case")
            ledger.release(fact_id=fid, actor="a", reason="closed")
        facts.erased[fid] = needles
        if space == "org":
            to_forget.append(fid)
    for fid in to_forget:
        ledger.forget(fact_id=fid, actor="dpo", reason="erasure", keep_digest=rng.random() < 0.5)
    for i in range(3):  # controls, in both spaces, never forgotten
        value, hexes = make_value(random.Random(1000 + i))
        event = ledger.assert_fact(
            subject=f"keep-{i}", predicate="p", value=value, space="org", actor="a"
        )
        facts.kept[event.fact_id] = [bytes.fromhex(h) for h in hexes]
    return sweep_space


@pytest.mark.parametrize("backend", ["jsonl", "sqlite", "postgres"])
def test_ledger_files_hold_no_erased_byte(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    n = scale(40, 400)
    rng = random.Random(42)
    folder = tmp_path / "ledger"
    pg = None
    if backend == "postgres":
        pytest.importorskip("agent_custody_state_events_postgres", reason="events-postgres")
        pg = request.getfixturevalue("embedded_postgres")
        location = f"{request.getfixturevalue('postgres_url')}&table=erasure"
    else:
        if backend == "sqlite":
            pytest.importorskip("agent_custody_state_events_sqlite", reason="events-sqlite")
        folder.mkdir()  # backends never create a folder
        location = str(folder / f"ledger.{backend}")
    facts = Facts()
    scans = 0
    with Ledger(location) as ledger:
        space = fill(ledger, rng, n, facts)
        result = ledger.sweep(
            before=datetime.now(UTC) + timedelta(seconds=5),
            space=space,
            actor="dpo",
            reason="retention",
        )
        assert result.forgotten and not result.held
        for fid in facts.erased:
            got = ledger.get(fid)
            assert got is not None and got.value is None and got.forgotten is not None, fid
        if backend != "postgres":
            # While open: the WAL and -shm are live files here.
            hits = scan(files_under(folder), facts.needles(facts.erased))
            assert not hits, f"erased bytes in the open ledger's files: {hits}"
            assert len(scan(files_under(folder), facts.needles(facts.kept))) == len(
                facts.needles(facts.kept)
            ), "the scan cannot see a kept value"
            scans += 2
    if pg is None:
        files = files_under(folder)
        owned = sorted(p.name for p in files)
    else:
        pg.checkpoint()
        pg.rotate_wal()
        files = [p for p in files_under(pg.data_dir) if "pg_wal" not in p.parts]
        owned = [f"{len(files)} files in the data directory (pg_wal excluded)"]
    hits = scan(files, facts.needles(facts.erased))
    assert not hits, f"erased bytes on disk: {hits}"
    kept = scan(files, facts.needles(facts.kept))
    assert len(kept) == len(facts.needles(facts.kept)), "the scan cannot see a kept value"
    scans += 2
    record(
        f"erasure[ledger {backend}]",
        facts_erased=len(facts.erased),
        needles=len(facts.needles(facts.erased)),
        files_scanned=len(files),
        scans=scans,
        control_needles_found=len(kept),
        bytes_found=0,
        owned=owned[:6],
    )

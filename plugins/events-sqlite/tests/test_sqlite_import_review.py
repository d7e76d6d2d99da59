"""Review of import into SQLite: an import lands whole or not at all (a kill mid-way, a failure
part-way), and a JSONL ledger moved into SQLite and back reads the same bytes."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from sqlite_support import SPEC_INDEXES, index_columns

from agent_custody_state import Ledger
from agent_custody_state.cli import main
from agent_custody_state.ledger.model import AssertEvent

N = 24_000  # several of import_events' batches (5,000)

IMPORT = """
import sys
from agent_custody_state.cli import main
sys.exit(main(["import", "--ledger", sys.argv[1], "--from", sys.argv[2]]))
"""


def _big_export(tmp_path: Path) -> Path:
    source = tmp_path / "big.jsonl"
    with Ledger(source) as ledger:
        for start in range(0, N, 4000):
            ledger.assert_many(
                [
                    {"subject": f"s{i}", "predicate": "p", "value": i, "space": "org", "actor": "a"}
                    for i in range(start, start + 4000)
                ]
            )
    out = tmp_path / "big-export.jsonl"
    assert main(["export", "--ledger", str(source), "--out", str(out)]) == 0
    return out


def _rows(path: Path) -> int:
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
            return int(db.execute("SELECT count(*) FROM events").fetchone()[0])
    except sqlite3.Error:  # not created yet, or no table yet
        return 0


def test_an_import_killed_mid_way_leaves_all_or_nothing(tmp_path: Path) -> None:
    export = _big_export(tmp_path)
    to = tmp_path / "to.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-c", IMPORT, str(to), str(export)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not _rows(to) and proc.poll() is None:  # the first committed rows
        assert time.monotonic() < deadline, "the import committed nothing in 60 s"
        time.sleep(0.0005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with Ledger(to) as ledger:
        count = ledger.count()
    assert count in (0, N), f"a killed import left {count} of {N} events"
    if count == 0:
        assert main(["import", "--ledger", str(to), "--from", str(export)]) == 0
    assert main(["verify", "--ledger", str(to), "--jobs", "2"]) == 0  # workers read the chunks
    assert index_columns(to) == SPEC_INDEXES


def test_an_import_that_fails_part_way_leaves_nothing_and_every_index(tmp_path: Path) -> None:
    with Ledger(":memory:") as source:
        source.assert_many(
            {"subject": f"s{i % 7}", "predicate": "p", "value": i, "space": "org", "actor": "a"}
            for i in range(12)
        )
        events = [e for e in source.backend.iter_events() if isinstance(e, AssertEvent)]
    path = tmp_path / "l.sqlite"
    with Ledger(path) as ledger:
        backend: Any = ledger.backend
        append = backend.append

        def failing(batch: Any) -> None:
            if backend.count() >= 10:
                raise OSError("the disk went away")
            append(batch)

        backend.append = failing
        with pytest.raises(OSError, match="went away"):
            ledger.import_events(events, batch_size=5)
    assert index_columns(path) == SPEC_INDEXES
    with Ledger(path) as again:
        assert again.count() == 0
        assert again.import_events(events) == 12  # and the import can simply be run again


def test_jsonl_to_sqlite_and_back_keeps_every_byte(tmp_path: Path) -> None:
    source = tmp_path / "src.jsonl"
    with Ledger(source) as ledger:
        a = ledger.assert_fact(
            subject="s", predicate="p", value={"b": 1, "a": "é\u2028"}, space="o", actor="x"
        )
        b = ledger.assert_fact(subject="s", predicate="q", value=1.5, space="o", actor="x")
        ledger.assert_fact(
            subject="s", predicate="p", value=[1], space="o", actor="x", supersedes=a.fact_id
        )
        ledger.forget(fact_id=b.fact_id, actor="x", reason="r")
        ledger.retract(fact_id=a.fact_id, actor="x", reason="r")
    out, db, back = tmp_path / "out.jsonl", tmp_path / "to.sqlite", tmp_path / "back.jsonl"
    assert main(["export", "--ledger", str(source), "--out", str(out)]) == 0
    assert main(["import", "--ledger", str(db), "--from", str(out)]) == 0
    with sqlite3.connect(db) as conn:
        rows = [r[0] + "\n" for r in conn.execute("SELECT json FROM events ORDER BY seq")]
    assert "".join(rows).encode() == source.read_bytes()
    assert main(["export", "--ledger", str(db), "--out", str(back)]) == 0
    assert back.read_bytes() == source.read_bytes()
    assert main(["verify", "--ledger", str(db)]) == 0

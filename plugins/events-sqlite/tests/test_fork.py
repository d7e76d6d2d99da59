"""A SQLite ``Ledger`` opened before ``fork()`` (nineteenth review).

A child forked after the open (gunicorn ``--preload``, ``multiprocessing`` with ``fork``) went on
with the parent's connection objects, events and key store, which SQLite forbids (its in-process
lock bookkeeping is the parent's). The child now opens connections of its own on first use and
keeps the inherited ones, unused and unclosed (``agent_custody_state_sql.forked``); at the fork
the backend's lock is new, so a lock or snapshot a thread of the parent held is not the child's.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.verify import verify_lines
from agent_custody_state_conformance.forking import fork_child as _fork
from agent_custody_state_conformance.forking import held
from agent_custody_state_conformance.forking import join_child as _join
from agent_custody_state_conformance.forking import work as _work


def _connections(ledger: Ledger) -> list[Any]:
    """The ledger's driver connections (events, and key store if any)."""
    events = getattr(ledger.backend, "inner", ledger.backend)
    found = [events._raw]
    keys = getattr(ledger.backend, "keys", None)
    if keys is not None:
        found.append(keys._conn)
    return found


def _check(path: Path, ledger: Ledger, ids: list[str]) -> None:
    live = [f.fact_id for f in ledger.as_of()]
    assert sorted(live) == sorted(ids)  # every write of both, once
    assert len(set(ids)) == len(ids)
    report = verify_lines(ledger.backend.stored_events())
    assert report.ok, report
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


@pytest.mark.parametrize("mode", ["plain", "crypto-shred"])
def test_a_forked_child_opens_connections_of_its_own(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "l.sqlite"
    with Ledger(path, forget_mode=mode) as ledger:
        ids = _work(ledger, "before")
        inherited = [id(c) for c in _connections(ledger)]

        def child() -> list[str]:
            written = _work(ledger, "child")
            mine = [id(c) for c in _connections(ledger)]
            # Never the parent's objects (which the child keeps referenced: ids stay unique).
            assert not set(mine) & set(inherited), "the child used the parent's connection"
            ledger.close()
            return written

        pid, read = _fork(child)
        ids += _work(ledger, "parent")  # at the same time as the child
        ids += _join(pid, read)
        ids += _work(ledger, "after")
        assert [id(c) for c in _connections(ledger)] == inherited  # the parent's own, still
        _check(path, ledger, ids)
    if mode == "crypto-shred":
        with sqlite3.connect(f"{path}.keys") as db:
            assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def test_a_child_forked_while_a_thread_holds_the_backend_is_not_inside_its_read(
    tmp_path: Path,
) -> None:
    """A thread of the parent inside a read snapshot at the fork held the backend's lock: the
    child waited on it for ever (no thread of its own would release it), and its state said a
    snapshot was open. The child gets a new lock and no snapshot."""
    path = tmp_path / "l.sqlite"
    with Ledger(path) as ledger:
        ids = _work(ledger, "before", 3)
        with held(ledger.backend.reading):
            pid, read = _fork(lambda: _work(ledger, "child", 3))
        ids += _join(pid, read)
        ids += _work(ledger, "after", 3)
        _check(path, ledger, ids)

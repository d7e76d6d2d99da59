"""A JSONL crypto-shred ``Ledger`` opened before ``fork()`` (nineteenth review): its key store.

The JSONL events reopen their lock file in a forked child (``LockFile``), but the key store's
SQLite connection went on in the child as the parent's, which SQLite forbids (its in-process
lock bookkeeping is the parent's), and a lock a thread of the parent held at the fork was never
released in the child. The child now opens its own connection on first use, keeps the inherited
one unused and unclosed, and gets a new lock at the fork (``backends.keystore_file``).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from agent_custody_state import Ledger
from agent_custody_state.ledger.verify import verify_lines
from agent_custody_state_conformance.forking import fork_child as _fork
from agent_custody_state_conformance.forking import held
from agent_custody_state_conformance.forking import join_child as _join
from agent_custody_state_conformance.forking import work as _work


def _keys(ledger: Ledger) -> Any:
    return ledger.backend.keys  # type: ignore[attr-defined]


def _check(path: Path, ledger: Ledger, ids: list[str]) -> None:
    live = [f.fact_id for f in ledger.as_of()]
    assert sorted(live) == sorted(ids)  # every write of both, once
    assert len(set(ids)) == len(ids)
    assert [f.value for f in ledger.as_of(subject="child0")] == ["child-v0"]  # its key is here
    report = verify_lines(ledger.backend.stored_events())
    assert report.ok, report
    with sqlite3.connect(f"{path}.keys") as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def test_a_forked_child_opens_a_key_store_connection_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    with Ledger(path, forget_mode="crypto-shred") as ledger:
        ids = _work(ledger, "before")
        inherited = id(_keys(ledger)._conn)

        def child() -> list[str]:
            written = _work(ledger, "child")
            # Never the parent's object (which the child keeps referenced: ids stay unique).
            assert id(_keys(ledger)._conn) != inherited, "the child used the parent's connection"
            ledger.close()
            return written

        pid, read = _fork(child)
        ids += _work(ledger, "parent")  # at the same time as the child
        ids += _join(pid, read)
        ids += _work(ledger, "after")
        assert id(_keys(ledger)._conn) == inherited  # the parent's own, still
        _check(path, ledger, ids)


def test_a_child_forked_while_a_thread_holds_the_key_store_is_not_stuck(tmp_path: Path) -> None:
    """A thread of the parent inside the key store at the fork held its lock: the child waited
    on it for ever. The child gets a new lock."""
    path = tmp_path / "l.jsonl"
    with Ledger(path, forget_mode="crypto-shred") as ledger:
        ids = _work(ledger, "before", 3)
        with held(lambda: _keys(ledger)._lock):
            pid, read = _fork(lambda: _work(ledger, "child", 3))
        ids += _join(pid, read)
        ids += _work(ledger, "after", 3)
        _check(path, ledger, ids)

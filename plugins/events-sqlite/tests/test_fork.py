"""A SQLite ``Ledger`` opened before ``fork()`` (nineteenth review).

A child forked after the open (gunicorn ``--preload``, ``multiprocessing`` with ``fork``) went on
with the parent's connection objects, events and key store, which SQLite forbids (its in-process
lock bookkeeping is the parent's). The child now opens connections of its own on first use and
keeps the inherited ones, unused and unclosed (``agent_custody_state_sql.forked``); at the fork
the backend's lock is new, so a lock or snapshot a thread of the parent held is not the child's.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.verify import verify_lines

FACT: dict[str, Any] = {"predicate": "p", "space": "o", "actor": "a"}
N = 20


def _work(ledger: Ledger, tag: str, n: int = N) -> list[str]:
    """``n`` asserts, each read back (by id and by subject); their fact ids."""
    ids = []
    for i in range(n):
        fact = ledger.assert_fact(subject=f"{tag}{i}", value=f"{tag}-v{i}", **FACT).fact
        assert [e.fact_id for e in ledger.history(fact.fact_id)] == [fact.fact_id]
        assert [f.value for f in ledger.as_of(subject=f"{tag}{i}")] == [f"{tag}-v{i}"]
        ids.append(fact.fact_id)
    return ids


def _connections(ledger: Ledger) -> list[Any]:
    """The ledger's driver connections (events, and key store if any)."""
    events = getattr(ledger.backend, "inner", ledger.backend)
    found = [events._raw]
    keys = getattr(ledger.backend, "keys", None)
    if keys is not None:
        found.append(keys._conn)
    return found


def _fork(child: Callable[[], Any]) -> tuple[int, int]:
    """Fork; the child runs ``child`` and writes its JSON result (exit 0) or its traceback
    (exit 1) to the pipe whose read end is returned with its pid."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        code = 1
        try:
            os.close(read)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)  # not a parent's handler
            signal.alarm(20)  # a child stuck on a lock its parent's thread held dies
            out = json.dumps(child()).encode()
            code = 0
        except BaseException:
            out = traceback.format_exc().encode()
        finally:
            try:  # a parent gone (its test failed) must not leave this child running pytest
                with os.fdopen(write, "wb") as pipe:
                    pipe.write(out)
            finally:
                os._exit(code)
    os.close(write)
    return pid, read


def _join(pid: int, read: int) -> Any:
    with os.fdopen(read, "rb") as pipe:
        out = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out or "the child died (stuck: SIGALRM)"
    return json.loads(out)


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
        inside, leave = threading.Event(), threading.Event()

        def hold() -> None:
            with ledger.backend.reading():
                inside.set()
                leave.wait(30)

        holder = threading.Thread(target=hold)
        holder.start()
        try:
            assert inside.wait(10)
            pid, read = _fork(lambda: _work(ledger, "child", 3))
        finally:
            leave.set()
            holder.join(30)
        ids += _join(pid, read)
        ids += _work(ledger, "after", 3)
        _check(path, ledger, ids)

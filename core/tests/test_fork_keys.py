"""A JSONL crypto-shred ``Ledger`` opened before ``fork()`` (nineteenth review): its key store.

The JSONL events reopen their lock file in a forked child (``LockFile``), but the key store's
SQLite connection went on in the child as the parent's, which SQLite forbids (its in-process
lock bookkeeping is the parent's), and a lock a thread of the parent held at the fork was never
released in the child. The child now opens its own connection on first use, keeps the inherited
one unused and unclosed, and gets a new lock at the fork (``backends.keystore_file``).
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


def _keys(ledger: Ledger) -> Any:
    return ledger.backend.keys  # type: ignore[attr-defined]


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
        inside, leave = threading.Event(), threading.Event()

        def hold() -> None:
            with _keys(ledger)._lock:
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

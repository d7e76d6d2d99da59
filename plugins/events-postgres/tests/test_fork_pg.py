"""A PostgreSQL ``Ledger`` opened before ``fork()`` (nineteenth review).

A web app opening its ledger at import and then forking workers (gunicorn ``--preload``,
``multiprocessing`` with ``fork``) gave the child the parent's session: both processes wrote on
one socket, and the protocol interleaved (answers read by the other process, errors, the session
ended). The child now opens sessions of its own on first use (events and key store), and never
closes or writes to the parent's (``agent_custody_state_sql.forked``)."""

from __future__ import annotations

import gc
import signal
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.verify import verify_lines
from agent_custody_state_conformance.forking import fork_child
from agent_custody_state_conformance.forking import join_child as _join
from agent_custody_state_conformance.forking import work as _work


def _sessions(ledger: Ledger) -> list[int]:
    """The server process ids of the ledger's sessions (events, and key store if any)."""
    events = getattr(ledger.backend, "inner", ledger.backend)
    found = [events._raw.pgconn.backend_pid]
    keys = getattr(ledger.backend, "keys", None)
    if keys is not None:
        found.append(keys._conn.pgconn.backend_pid)
    return found


@contextmanager
def _deadline(seconds: int) -> Iterator[None]:
    """A parent stuck reading an answer the child took fails instead of hanging."""

    def expired(*_: Any) -> None:
        raise TimeoutError("stuck on a session shared with the child")

    before = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)


@pytest.mark.parametrize("mode", ["plain", "crypto-shred"])
def test_a_forked_child_writes_on_sessions_of_its_own(postgres_url: str, mode: str) -> None:
    url = f"{postgres_url}&table=fork_{uuid.uuid4().hex[:8]}"
    # Crypto-shred: the keys in this test's database (the role may not create another).
    keys = {"key_store": f"{url}_keys"} if mode == "crypto-shred" else {}
    with Ledger(url, forget_mode=mode, **keys) as ledger, _deadline(30):
        ids = _work(ledger, "before")
        sessions = _sessions(ledger)

        def child() -> list[str]:
            written = _work(ledger, "child")
            mine = _sessions(ledger)
            assert not set(mine) & set(sessions), (mine, sessions)  # its own sessions
            ledger.close()  # ends the child's sessions, not the parent's
            return written

        pid, read = _fork(child)
        ids += _work(ledger, "parent")  # at the same time as the child
        ids += _join(pid, read)
        ids += _work(ledger, "after")
        assert _sessions(ledger) == sessions  # the parent's sessions are still the same
        live = [f.fact_id for f in ledger.as_of()]
        assert sorted(live) == sorted(ids)  # every write of both, once
        assert len(set(ids)) == 4 * 20  # four workloads of ``work``'s default
        report = verify_lines(ledger.backend.stored_events())
        assert report.ok, report


def test_a_child_closing_the_ledger_it_inherited_leaves_the_parents_sessions(
    postgres_url: str,
) -> None:
    """A worker closing its inherited ledger (at exit, say) closed the parent's connection
    objects: libpq sent Terminate on the shared sockets and the server ended the parent's
    sessions. The child's close now leaves them, and writes nothing to their sockets."""
    url = f"{postgres_url}&table=fork_{uuid.uuid4().hex[:8]}"
    keys = f"{url}_keys"
    with Ledger(url, forget_mode="crypto-shred", key_store=keys) as ledger, _deadline(30):
        ids = _work(ledger, "before", 2)
        sessions = _sessions(ledger)

        def child() -> None:
            ledger.close()
            gc.collect()

        _join(*_fork(child))
        ids += _work(ledger, "after", 2)
        assert _sessions(ledger) == sessions  # not ended (a lost one is replaced silently)
        assert sorted(f.fact_id for f in ledger.as_of()) == sorted(ids)


def test_a_child_forked_while_a_thread_holds_the_backend_is_not_inside_its_read(
    postgres_url: str,
) -> None:
    """A thread of the parent inside a read snapshot at the fork held the backend's lock: the
    child waited on it for ever. The child gets a new lock and no snapshot; the parent's
    snapshot goes on."""
    url = f"{postgres_url}&table=fork_{uuid.uuid4().hex[:8]}"
    with Ledger(url) as ledger, _deadline(30):
        ids = _work(ledger, "before", 3)
        inside, leave = threading.Event(), threading.Event()
        seen: list[int] = []

        def hold() -> None:
            with ledger.backend.reading():
                seen.append(len(ledger.as_of()))  # the snapshot is taken here
                inside.set()
                leave.wait(30)
                seen.append(len(ledger.as_of()))  # still it, after the child's writes

        holder = threading.Thread(target=hold)
        holder.start()
        try:
            assert inside.wait(10)
            pid, read = _fork(lambda: _work(ledger, "child", 3))
            ids += _join(pid, read)
        finally:
            leave.set()
            holder.join(30)
        assert seen == [3, 3]
        ids += _work(ledger, "after", 3)
        assert sorted(f.fact_id for f in ledger.as_of()) == sorted(ids)


def _fork(child: Callable[[], Any]) -> tuple[int, int]:
    """A child that dies stuck on a shared socket before its parent gives up."""
    return fork_child(child, alarm=25)

"""A ``Ledger`` forked while another thread of the parent is inside it (nineteenth review).

A lock a thread of the parent held at the fork is never released in the child, whose first
write hung (the backend's section lock, the crypto-shred section's, the ledger's lifecycle); the
section that thread was in (its depth, its appends not committed) was taken for the child's own.
Each is reset in the child at the fork (``ledger.forks``): new locks, no section, the parent's
uncommitted appends dropped as a rollback drops them, and ``close`` waits for no write of a
thread that does not exist there.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.verify import verify_lines
from agent_custody_state_conformance.forking import fork_child as _fork
from agent_custody_state_conformance.forking import held as _held
from agent_custody_state_conformance.forking import join_child as _join
from agent_custody_state_conformance.forking import work as _work


@pytest.mark.parametrize("mode", ["plain", "crypto-shred"])
def test_a_child_forked_amid_a_threads_write_section_writes_its_own(
    tmp_path: Path, mode: str
) -> None:
    """The parent's thread has appended an event it has not committed when the child is forked:
    the child neither waits for that thread nor sees its event, and writes its own."""
    path = tmp_path / "l.jsonl"
    with Ledger(path, forget_mode=mode) as ledger:
        ids = _work(ledger, "before", 3)
        with Ledger("memory:", chain=False) as elsewhere:
            uncommitted = elsewhere.assert_fact(
                subject="s", predicate="p", value="v", space="org", actor="a", fact_id="fact-x"
            )

        @contextmanager
        def section() -> Iterator[None]:
            try:
                with ledger.backend.transaction():
                    ledger.backend.append([uncommitted])
                    yield
                    raise LookupError("rolled back")  # the parent's section never commits
            except LookupError:
                pass

        def child() -> list[str]:
            assert ledger.get("fact-x") is None  # not the child's to see
            written = _work(ledger, "child", 3)
            ledger.close()  # waits for no write of the parent's thread
            return written

        with _held(section):
            pid, read = _fork(child)  # it waits for the parent's file lock, not for a thread
        ids += _join(pid, read)
        ids += _work(ledger, "after", 3)
        assert sorted(f.fact_id for f in ledger.as_of()) == sorted(ids)
        assert ledger.get("fact-x") is None
        assert verify_lines(ledger.backend.stored_events()).ok


def test_a_child_forked_amid_a_threads_ledger_write_can_close(tmp_path: Path) -> None:
    """A thread of the parent inside a ledger write (its lifecycle entered) at the fork: the
    child's ``close`` waited for that write for ever."""
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        ids = _work(ledger, "before", 2)

        @contextmanager
        def writing() -> Iterator[None]:
            ledger._life.enter()
            try:
                yield
            finally:
                ledger._life.leave()

        with _held(writing):
            pid, read = _fork(lambda: [*_work(ledger, "child", 2), ledger.close()][:-1])
            ids += _join(pid, read)
        assert sorted(f.fact_id for f in ledger.as_of()) == sorted(ids)

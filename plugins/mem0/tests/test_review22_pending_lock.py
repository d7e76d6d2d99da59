"""Twenty-second review: the pending-adds sidecar's lock is waited for with a bound.

``PendingAdds`` took a blocking ``flock`` on ``<pending_file>.lock``: another process stopped
while holding it (a debugger, ``SIGSTOP``, a hung mount) made every put of the store, in every
other process, wait forever (the wait runs on a worker thread no cancel reaches). The wait is now
the core's ``lockwait.exclusive``, 60 s by default; past it the put fails with the store's
``StoreError`` naming the file and the holder, and nothing is recorded.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from agent_custody_state.plugin import DEFAULT_LOCK_TIMEOUT
from agent_custody_state.stores import StoreError
from agent_custody_state_conformance.stores import make_fact
from agent_custody_state_mem0.pending import PendingAdds
from agent_custody_state_mem0.store import Mem0Store
from agent_custody_state_mem0.testing import FakeMem0

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "core" / "tests"))
from lockholder import holding  # the core's stuck lock holder

MakeStore = Callable[..., Mem0Store]
NEVER = 10**6  # PENDING answers an event gives before it settles: it does not, in a test


def test_a_stopped_holder_of_the_sidecar_lock_fails_a_put_in_bounded_time(
    fake: FakeMem0, make_store: MakeStore, tmp_path: Path
) -> None:
    sidecar = tmp_path / "pending.jsonl"
    fake.async_add, fake.event_polls_pending = True, NEVER
    store = make_store(event_wait_seconds=0.2, pending_file=str(sidecar))
    assert store.pending.lock_timeout == DEFAULT_LOCK_TIMEOUT  # the documented default
    store.pending.lock_timeout = 0.5
    outcome: list[BaseException | str] = []

    def put() -> None:  # on a thread: before the fix it never returned while the lock was held
        try:
            anyio.run(store.put, make_fact())
            outcome.append("stored")
        except BaseException as exc:
            outcome.append(exc)

    with holding(Path(f"{sidecar}.lock"), stopped=True) as pid:
        worker = threading.Thread(target=put, daemon=True)
        worker.start()
        worker.join(20)
        assert outcome, "the put waited on the stopped holder's lock without a bound"
    [error] = outcome
    assert isinstance(error, StoreError), error
    text = str(error)
    assert f"pending add events file {sidecar} is locked" in text
    assert f"by process {pid}" in text and "within 0.5s" in text and "resume or end it" in text
    assert not sidecar.exists()  # nothing recorded
    worker.join(5)


def test_the_bound_is_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="0 or more seconds"):
        PendingAdds(tmp_path / "p.jsonl", -1)
    assert PendingAdds(tmp_path / "p.jsonl", None).lock_timeout is None  # as asked: no bound

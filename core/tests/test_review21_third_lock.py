"""Twenty-first review, third wave: ``verify`` of a JSONL file waits a bounded time for its lock.

``agent-custody-memory verify <file>.jsonl`` (and the proof commands) read the file directly
under a shared ``flock`` of ``<file>.lock`` (``jsonl_lines.stored_lines``). That lock was taken
with a plain blocking ``flock``, outside the backend's ``lock_timeout``: a writer stopped while
holding the lock left ``verify`` waiting forever. It is now waited for as a backend's is.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from lockholder import HOLD, holding

from agent_custody_state import Ledger
from agent_custody_state.backends import jsonl_lock
from agent_custody_state.backends.jsonl_lines import stored_lines
from agent_custody_state.ledger.backend import EventBackendError

FACT = {"space": "o", "subject": "s", "predicate": "p", "actor": "a"}


def test_stored_lines_waits_at_most_the_lock_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonl_lock, "DEFAULT_LOCK_TIMEOUT", 0.3)
    path = tmp_path / "ledger.jsonl"
    with Ledger(path) as led:
        led.assert_fact(**FACT, value="v")
    lock = Path(f"{path}.lock")
    fd = os.open(lock, os.O_RDONLY)
    outcome: list[BaseException | None] = []

    def read() -> None:
        try:
            list(stored_lines(path, fd))
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    with holding(lock) as pid:  # released at the end: a waiting read goes on
        thread = threading.Thread(target=read, daemon=True)
        thread.start()
        thread.join(5)
        assert outcome, "the read still waits for a lock holder that does not release it"
    err = outcome[0]
    assert isinstance(err, EventBackendError), err
    assert f"process {pid}" in str(err) and "lock_timeout=0.3s" in str(err)
    assert str(lock) in str(err)
    assert len(list(stored_lines(path, fd))) == 1  # released: read as before
    os.close(fd)


def test_the_lock_granted_after_a_wait_is_on_the_same_descriptor(tmp_path: Path) -> None:
    """The lock a queued wait got is held by ``fd`` itself (another process cannot take it)
    and is released by unlocking ``fd``."""
    lock = tmp_path / "ledger.jsonl.lock"
    lock.touch()
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    fd = os.open(lock, os.O_RDONLY)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"held\n"
        threading.Timer(0.3, child.stdin.close).start()  # type: ignore[union-attr]
        jsonl_lock.take(fd, fcntl.LOCK_EX, timeout=10, lock=lock, location="x")
        child.wait(10)
        other = os.open(lock, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            jsonl_lock.take(fd, fcntl.LOCK_UN, timeout=10, lock=lock, location="x")
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(other)
    finally:
        os.close(fd)

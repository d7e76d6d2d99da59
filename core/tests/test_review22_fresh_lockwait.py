"""Twenty-second review, fresh eyes: a lock wait given up by an exception keeps no lock.

``lockwait.queued`` waits for a ``flock`` on a helper thread, on a second open file description
of the file, and hands the lock over to the caller's descriptor (``dup2``). Only a timeout told
the helper to drop what it got: an interrupt during the wait (Ctrl-C, which a sweep, the server
or a REPL catches and lives on) left the helper to be granted the lock later and keep it, on a
descriptor nobody closes, so every later lock of the file, in every process and in this one,
waited for this process until its bound ran out. A ``dup2`` refused after the grant likewise
left the second descriptor open, holding the lock.
"""

from __future__ import annotations

import fcntl
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from agent_custody_state import lockwait


class Interrupted(Exception):
    """What the test's SIGALRM handler raises, as Ctrl-C raises ``KeyboardInterrupt``."""


def interrupt(signum: int, frame: FrameType | None) -> None:
    raise Interrupted


@pytest.fixture
def path(tmp_path: Path) -> Path:
    file = tmp_path / "locked"
    file.write_bytes(b"")
    return file


@pytest.fixture
def alarm() -> Iterator[None]:
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def free_soon(path: Path, within: float = 2.0) -> bool:
    """Whether the file's exclusive lock can be taken (by a new descriptor) within ``within``."""
    fd = os.open(path, os.O_RDWR)
    try:
        deadline = time.monotonic() + within
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.01)
    finally:
        os.close(fd)


@pytest.mark.usefixtures("alarm")
def test_an_interrupted_wait_leaves_no_lock_behind(path: Path) -> None:
    holder = os.open(path, os.O_RDWR)  # another open file description: it conflicts
    fcntl.flock(holder, fcntl.LOCK_EX)
    fd = os.open(path, os.O_RDWR)
    before = set(threading.enumerate())
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        with pytest.raises(Interrupted):
            lockwait.wait(fd, fcntl.LOCK_EX, 10)
        helpers = [t for t in threading.enumerate() if t not in before]
        assert [t.name for t in helpers] == ["flock-wait"]
        os.close(holder)  # released after the interrupt: the helper is granted it now ...
        holder = -1
        helpers[0].join(2.0)  # ... and has done with it (kept it, or dropped it)
        assert not helpers[0].is_alive()
        assert free_soon(path, within=0), "the interrupted wait's helper kept the lock"
    finally:
        os.close(fd)
        if holder >= 0:
            os.close(holder)


def test_a_refused_handover_leaves_no_lock_behind(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(fd: int, fd2: int, inheritable: bool = True) -> int:
        raise OSError(9, "Bad file descriptor")

    fd = os.open(path, os.O_RDWR)
    try:
        with monkeypatch.context() as patch:
            patch.setattr(os, "dup2", refused)
            with pytest.raises(OSError, match="Bad file descriptor"):
                lockwait.queued(fd, fcntl.LOCK_EX, 5)
        assert free_soon(path, within=0.5), "the second descriptor kept the lock"
    finally:
        os.close(fd)


def test_a_granted_wait_still_hands_the_lock_over(path: Path) -> None:
    fd = os.open(path, os.O_RDWR)
    try:
        assert lockwait.queued(fd, fcntl.LOCK_EX, 5) is True
        assert not free_soon(path, within=0.05)  # ``fd`` holds it
        fcntl.flock(fd, fcntl.LOCK_UN)
        assert free_soon(path, within=0.5)
    finally:
        os.close(fd)

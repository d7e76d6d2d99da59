"""A process holding a file's ``flock`` for a test, stopped (``SIGSTOP``) if asked: the stuck
lock holder of the JSONL lock-wait tests. The process is resumed and ended on the way out."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HOLD = (
    "import fcntl, os, sys\n"
    "fd = os.open(sys.argv[1], os.O_RDWR)\n"
    "fcntl.flock(fd, fcntl.LOCK_EX)\n"
    "print('held', flush=True)\n"
    "sys.stdin.read()\n"  # until the test closes stdin
)


@contextmanager
def holding(lock: Path, *, stopped: bool = False) -> Iterator[int]:
    """Yield the pid of a child that holds ``lock`` exclusively (stopped when ``stopped``);
    it releases the lock when the block ends."""
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == b"held\n"
        if stopped:
            os.kill(child.pid, signal.SIGSTOP)
        yield child.pid
    finally:
        os.kill(child.pid, signal.SIGCONT)
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=10)

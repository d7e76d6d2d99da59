"""Twenty-first review: a SQLite ledger whose write lock another process holds and never frees.

Another process begins a write (``BEGIN IMMEDIATE``) and is stopped (``SIGSTOP``, always
resumed). A write of this process waits ``busy_timeout`` seconds, not forever, and fails with an
error naming the bound and the process holding the lock (``causes.holder``), leaving the files
as they were; reads go on (WAL readers never wait for a writer).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state_events_sqlite.store import DEFAULT_BUSY_TIMEOUT

FACT = {"space": "o", "subject": "s", "predicate": "p", "actor": "a"}

_HOLD = (
    "import sqlite3, sys\n"
    "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
    "c.execute('BEGIN IMMEDIATE')\n"
    "print('held', flush=True)\n"
    "sys.stdin.read()\n"  # until the test closes stdin
)


def _files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in path.parent.iterdir() if not p.name.endswith("-shm")}


def test_a_write_waits_the_busy_timeout_and_names_the_holder(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    led = Ledger(path, busy_timeout=0.3)
    fact = led.assert_fact(**FACT, value="v1")
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == b"held\n"
        os.kill(child.pid, signal.SIGSTOP)
        before = _files(path)
        for write in (
            lambda: led.assert_fact(**FACT, value="v2", supersedes=fact.fact_id),
            lambda: led.retract(fact_id=fact.fact_id, actor="a", reason="r"),
        ):
            started = time.monotonic()
            with pytest.raises(EventBackendError) as err:
                write()
            assert time.monotonic() - started < 3
            text = str(err.value)
            assert "busy timeout, 0.3 s" in text and f"process {child.pid} kept it" in text
            assert _files(path) == before
        got = led.get(fact.fact_id)  # a reader does not wait for the stopped writer
        assert got is not None and got.value == "v1"
    finally:
        os.kill(child.pid, signal.SIGCONT)
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=10)
    led.assert_fact(**FACT, value="v2", supersedes=fact.fact_id)  # released: writes again
    led.close()


def test_the_default_bound_is_finite() -> None:
    assert 0 < DEFAULT_BUSY_TIMEOUT <= 300

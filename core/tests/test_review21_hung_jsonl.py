"""Twenty-first review: a JSONL ledger whose lock file is held by a process that stopped.

Another process takes ``<file>.lock`` and is stopped (``SIGSTOP``); an open, a write and a read
of this process wait at most ``lock_timeout`` seconds, then fail with an error naming the lock
file, the bound and the stopped process, leaving the ledger's bytes as they were. Resumed and
released, the same ledger works again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from lockholder import holding

from agent_custody_state import Ledger
from agent_custody_state.backends.jsonl_lock import DEFAULT_LOCK_TIMEOUT
from agent_custody_state.ledger.backend import EventBackendError

FACT = {"space": "o", "subject": "s", "predicate": "p", "actor": "a"}


@pytest.fixture
def stopped_holder(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A ledger with one fact, and a stopped process holding its lock file."""
    path = tmp_path / "ledger.jsonl"
    with Ledger(path) as led:
        led.assert_fact(**FACT, value="before")
    with holding(Path(f"{path}.lock"), stopped=True) as pid:
        yield path, pid


def _refused(call: object, path: Path, pid: int) -> None:
    before = path.read_bytes()
    started = time.monotonic()
    with pytest.raises(EventBackendError) as err:
        call()  # type: ignore[operator]
    assert time.monotonic() - started < 3
    text = str(err.value)
    assert f"{path}.lock" in text and "lock_timeout=0.2s" in text
    assert f"process {pid}" in text and "nothing was changed" in text
    assert path.read_bytes() == before


def test_open_waits_a_bounded_time(stopped_holder: tuple[Path, int]) -> None:
    path, pid = stopped_holder
    _refused(lambda: Ledger(path, lock_timeout=0.2), path, pid)


def test_write_and_read_wait_a_bounded_time(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    led = Ledger(path, lock_timeout=0.2)
    fact = led.assert_fact(**FACT, value="before")
    with holding(Path(f"{path}.lock"), stopped=True) as pid:
        _refused(lambda: led.assert_fact(**FACT, value="during"), path, pid)
        _refused(lambda: led.get(fact.fact_id), path, pid)
    # Released: the same ledger writes again, and the refused write left nothing behind.
    led.assert_fact(**FACT, value="after", supersedes=fact.fact_id)
    led.close()
    data = path.read_bytes()
    assert b'"during"' not in data and b'"after"' in data


def test_the_bound_is_an_option_with_a_generous_default(tmp_path: Path) -> None:
    assert DEFAULT_LOCK_TIMEOUT >= 30
    with pytest.raises(ValueError, match="lock_timeout"):
        Ledger(tmp_path / "l.jsonl", lock_timeout=-1)
    with pytest.raises(TypeError, match="lock_timeout"):
        Ledger(tmp_path / "l.jsonl", lock_timeout="5")

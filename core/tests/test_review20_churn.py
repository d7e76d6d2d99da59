"""A long-lived process that opens and closes ledgers (a ledger per request or per job).

Thousands of open/use/close cycles must leave nothing behind that grows with their number:
descriptors, threads, module-level registries. A ledger only dropped (no ``close()``) must
give its descriptors back when it is collected, and say so (``ResourceWarning``, as an unclosed
file does); a new ledger on the same path works meanwhile.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import warnings
from datetime import datetime
from pathlib import Path

import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger import forks, locking

CYCLES = 40
FAR = "2999-01-01T00:00:00+00:00"


def descriptors() -> int:
    """The process's open descriptors, once the key pools' refill threads (crypto-shred) have
    ended: a dropped ledger's thread holds its key store until its block is prepared, later on
    a loaded machine (CI counted 8 still open); a leak stays open after they end."""
    for thread in threading.enumerate():
        if thread.name == "acs-key-refill":
            thread.join(30)
    gc.collect()
    return len(os.listdir("/proc/self/fd"))


def one_fact(ledger: Ledger, value: object = "v") -> str:
    event = ledger.assert_fact(subject="s", predicate="p", value=value, space="org", actor="a")
    return event.fact.fact_id


def dropped(location: str, cycles: int, **options: object) -> int:
    """Open ``location``, write, and drop the ledger ``cycles`` times: descriptors gained."""
    before = descriptors()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        for number in range(cycles):
            one_fact(Ledger(location, **options), number)  # type: ignore[arg-type]
    return descriptors() - before


@pytest.mark.parametrize("mode", ["plain", "crypto-shred"])
def test_a_dropped_jsonl_ledger_gives_its_descriptors_back(tmp_path: Path, mode: str) -> None:
    """Its lock file and the ledger file it held stayed open for the process's life: two
    descriptors per dropped ledger, until ``open`` failed with EMFILE."""
    path = str(tmp_path / "l.jsonl")
    dropped(path, 1, forget_mode=mode)  # the first open creates the sidecars
    assert dropped(path, CYCLES, forget_mode=mode) <= 1
    with Ledger(path, forget_mode=mode) as ledger:  # the path still opens and writes
        one_fact(ledger)
        assert ledger.count() == CYCLES + 2


def test_a_dropped_ledger_says_it_was_not_closed(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    ledger = Ledger(str(path))
    one_fact(ledger)
    with pytest.warns(ResourceWarning, match=r"l\.jsonl was not closed; close it"):
        del ledger
        gc.collect()
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", ResourceWarning)
        with Ledger(str(path)) as ledger:  # a closed one says nothing
            one_fact(ledger)
        Ledger(str(path)).close()
        del ledger
        gc.collect()
    assert [w for w in said if issubclass(w.category, ResourceWarning)] == []


@pytest.mark.parametrize("location", ["memory:", "jsonl"])
def test_open_write_close_cycles_leave_nothing_behind(tmp_path: Path, location: str) -> None:
    where = location if location == "memory:" else str(tmp_path / "l.jsonl")
    Ledger(where, forget_mode="crypto-shred").close()

    def cycle() -> None:
        with Ledger(where, forget_mode="crypto-shred") as ledger:
            ledger.forget(fact_id=one_fact(ledger), actor="a", reason="r")
            ledger.close()  # twice: the second does nothing

    cycle()
    before = (descriptors(), threading.active_count(), len(forks._WATCHED))
    for _ in range(CYCLES):
        cycle()
    assert (descriptors(), threading.active_count(), len(forks._WATCHED)) == before


def test_the_far_ahead_warning_remembers_no_closed_ledger(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A ledger whose last event is stamped far ahead of this clock warns once per open
    backend; the set of those warned grew by one entry per ledger opened, for good (and a new
    backend given a collected one's ``id`` was never warned)."""
    path = str(tmp_path / "l.jsonl")
    with Ledger(path, clock=lambda: datetime.fromisoformat(FAR)) as ahead:
        one_fact(ahead)
    before = len(locking._warned)
    with caplog.at_level(logging.WARNING, logger=locking.__name__):
        for _ in range(CYCLES):
            with Ledger(path) as ledger:
                one_fact(ledger)
                one_fact(ledger)  # the same backend warns once
    assert len(locking._warned) - before <= 1
    assert sum("ahead of this host's clock" in r.getMessage() for r in caplog.records) == CYCLES

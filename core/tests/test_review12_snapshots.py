"""Twelfth review, snapshots: ``timeline``, ``status`` and ``facts`` ask the backend several
questions; each now reads one state, as the as-of reads do (docs/decisions.md, "One ledger,
many threads"). On ``memory:`` and JSONL, with another thread's writes run between two of a
read's questions: the read answers as before the writes, or as after them, never a mix.

The race is made deterministic without sleeps: the first time the read asks ``method``, a
writer thread starts, and the read goes on once the writer has finished (the read held no
snapshot) or waits for the backend's lock (``SpyLock``: the read holds its snapshot).
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from agent_custody_state import Ledger
from agent_custody_state_conformance.threads import spy_on

T = TypeVar("T")
FACT: dict[str, Any] = {"predicate": "p", "space": "o", "actor": "a"}


@pytest.fixture(params=["memory", "jsonl"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    location = "memory:" if request.param == "memory" else str(tmp_path / "l.jsonl")
    with Ledger(location) as opened:
        yield opened


def _interleaved(ledger: Ledger, method: str, read: Callable[[], T], write: Callable[[], Any]) -> T:
    """``read()``, with ``write()`` run on another thread when the read first asks the backend
    ``method`` (before it is answered)."""
    backend = ledger.backend
    spy = spy_on(ledger)
    settled = spy.waiting  # the writer waits for the lock, or (below) has finished
    real = getattr(backend, method)
    errors: list[str] = []
    writers: list[threading.Thread] = []

    def writer() -> None:
        spy.watched = threading.get_ident()
        try:
            write()
        except BaseException:
            errors.append(traceback.format_exc())
        finally:
            settled.set()

    def asked(*args: Any, **kwargs: Any) -> Any:
        if not writers:
            writers.append(threading.Thread(target=writer))
            writers[0].start()
            assert settled.wait(10)
        return real(*args, **kwargs)

    setattr(backend, method, asked)  # this instance only, removed below
    try:
        answer = read()
    finally:
        delattr(backend, method)
    assert writers, f"the read never asked {method}"
    writers[0].join(10)
    assert not errors, errors[0]
    return answer


def _either(ledger: Ledger, method: str, read: Callable[[], T], write: Callable[[], Any]) -> None:
    before = read()
    during = _interleaved(ledger, method, read, write)
    after = read()
    assert before != after  # the writes change the answer
    assert during in (before, after), (before, during, after)


def test_facts_reads_one_state(ledger: Ledger) -> None:
    """``facts`` listed the asserts, then the confirms: a fact listed before another thread
    asserted one more and then confirmed the first came back attested without the new one."""
    first = ledger.assert_fact(subject="s", value=1, **FACT).fact.fact_id

    def read() -> list[tuple[str, str]]:
        return [(f.fact_id, f.provenance) for f in ledger.facts()]

    def write() -> None:
        ledger.assert_fact(subject="t", value=2, **FACT)
        ledger.confirm(fact_id=first, actor="a")

    _either(ledger, "events_for", read, write)


def test_a_timeline_reads_one_state(ledger: Ledger) -> None:
    """``timeline`` found the subject's asserts, then what supersedes them: a replacement
    appended in between showed the old fact superseded by a fact the timeline did not list."""
    first = ledger.assert_fact(subject="s", value=1, **FACT).fact.fact_id

    def read() -> tuple[object, ...]:
        line = ledger.timeline("s")
        facts = [(f.fact_id, f.valid_to) for f in line.facts]
        return facts, line.states, line.held, [e.event_id for e in line.events]

    _either(
        ledger,
        "superseders",
        read,
        lambda: ledger.assert_fact(subject="s", value=2, supersedes=first, **FACT),
    )


def test_a_status_reads_one_state(ledger: Ledger) -> None:
    """``status`` asked who supersedes the fact, then its events: a replacement and a hold
    appended in between gave "current" and held, a state the fact never had."""
    first = ledger.assert_fact(subject="s", value=1, **FACT).fact.fact_id

    def write() -> None:
        ledger.assert_fact(subject="s", value=2, supersedes=first, **FACT)
        ledger.hold(fact_id=first, actor="a", reason="audit")

    _either(ledger, "events_for", lambda: ledger.status(first), write)

"""The chain head of a ledger whose last event has no record, computed at the server's start in
a child process (``server.warmup``), so the first call that needs it does not compute it on the
ledger's thread."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agent_custody_state import Ledger
from agent_custody_state.config import load_config
from agent_custody_state.ledger.chain import head_after
from agent_custody_state.server import warmup
from agent_custody_state.server.resources import read_head
from agent_custody_state.server.runtime import open_runtime

FACT = {"predicate": "plan", "space": "org", "actor": "a"}


def _unchained(path: Path, count: int) -> None:
    """A ledger as the original writes it: no chain record on any event."""
    with Ledger(path, chain=False) as ledger:
        ledger.assert_many([{**FACT, "subject": f"acct:{i}", "value": i} for i in range(count)])


def test_the_head_is_computed_at_start_up_in_a_child_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "original.jsonl"
    _unchained(path, 40)
    monkeypatch.setattr(warmup, "WARM_AT", 40)
    runtime = open_runtime(load_config(ledger=str(path)))
    try:
        assert runtime.warmup is not None
        runtime.warmup.join(60)
        backend = runtime.ledger.backend
        expected = head_after(backend.last_event(), backend.stored_events)
        assert backend._computed_head is not None
        assert backend._computed_head[1] == expected and expected.seq == 40
        # The head resource and the first write no longer read the ledger from the start.
        monkeypatch.setattr(backend, "stored_events", lambda: pytest.fail("read from the start"))
        monkeypatch.setattr(backend, "events_newest_first", lambda: pytest.fail("read back"))
        head = runtime.worker.call(read_head, runtime.ledger)
        assert head["chainHead"] == {"seq": 40, "hash": expected.hash, "chained": False}
        runtime.worker.call(runtime.ledger.assert_fact, **FACT, subject="acct:new", value="ours")
    finally:
        runtime.close()


def test_a_child_that_fails_only_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The child cannot open the ledger (here: it is gone): a warning, and the head is
    computed where it is first needed, as without the child."""
    path = tmp_path / "original.jsonl"
    _unchained(path, 3)
    with Ledger(path) as ledger:
        expected = ledger.chain_head()
        ledger.backend._computed_head = None
        with caplog.at_level(logging.WARNING):
            started = warmup.Warmup(ledger.backend, str(tmp_path / "missing" / "l.jsonl"))
            started.join(60)
        assert "could not compute the chain head at start-up" in caplog.text
        assert ledger.backend._computed_head is None and ledger.chain_head() == expected


def test_only_a_large_shared_ledger_ending_without_a_record_is_warmed(tmp_path: Path) -> None:
    unchained = tmp_path / "original.jsonl"
    _unchained(unchained, 3)
    chained = tmp_path / "chained.jsonl"
    with Ledger(chained) as ledger:
        ledger.assert_many([{**FACT, "subject": f"acct:{i}", "value": i} for i in range(3)])
    at = warmup.WARM_AT
    with Ledger(unchained) as ledger:
        assert warmup.needs_warming(ledger.backend, at)
        assert not warmup.needs_warming(ledger.backend, at - 1)  # small: computed where needed
    with Ledger(chained) as ledger:
        assert not warmup.needs_warming(ledger.backend, at)
    with Ledger("memory:", chain=False) as ledger:  # another instance would be another ledger
        ledger.assert_fact(**FACT, subject="s", value=1)
        assert not warmup.needs_warming(ledger.backend, at)

"""The chain head of a ledger whose last event has no record, computed at the server's start on
a second instance of the backend (``server.warmup``), so the first call that needs it does not
compute it on the ledger's thread."""

from __future__ import annotations

import threading
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


def test_the_head_is_computed_at_start_up_on_a_second_instance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "original.jsonl"
    _unchained(path, 40)
    monkeypatch.setattr(warmup, "WARM_AT", 40)
    started: list[threading.Thread] = []
    real = warmup.warm_chain_head

    def watched(*args: object) -> threading.Thread:
        started.append(real(*args))  # type: ignore[arg-type]
        return started[-1]

    monkeypatch.setattr("agent_custody_state.server.runtime.warm_chain_head", watched)
    runtime = open_runtime(load_config(ledger=str(path)))
    try:
        [thread] = started
        thread.join(30)
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


def test_a_small_or_chained_ledger_starts_no_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(warmup, "WARM_AT", 40)
    monkeypatch.setattr(
        "agent_custody_state.server.runtime.warm_chain_head",
        lambda *a: pytest.fail("a thread was started"),
    )
    small = tmp_path / "small.jsonl"
    _unchained(small, 39)
    chained = tmp_path / "chained.jsonl"
    with Ledger(chained) as ledger:
        ledger.assert_many([{**FACT, "subject": f"acct:{i}", "value": i} for i in range(40)])
    for path in (small, chained):
        open_runtime(load_config(ledger=str(path))).close()

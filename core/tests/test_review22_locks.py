"""Twenty-second review: every JSONL-side ``flock`` waits a bounded time for a stopped holder.

The JSONL ledger's lock file was bounded by ``lock_timeout`` (twenty-first review); the
sidecars' own locks were not: the outbox (``stores.outbox_lock``) and the checkpoint notes
(``ledger.appending.append_locked``) took a blocking ``flock``, so a process stopped while holding
one made every owe, settle, resume and checkpoint of every other process wait forever. Each now
waits through ``lockwait`` (queued in the kernel, bounded): past the bound the call is refused
naming the file, the holder and the bound, and the file keeps its bytes; a healthy holder that
releases within the bound is still waited for, and the call then writes as before.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from lockholder import holding

from agent_custody_state import AssertEvent, AssertRequest, Ledger
from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state.ledger.checkpoints import split_notes
from agent_custody_state.ledger.model import Fact
from agent_custody_state.lockwait import DEFAULT_LOCK_TIMEOUT
from agent_custody_state.stores import StoreSet, VerifyPolicy
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore
from agent_custody_state.stores.outbox import Outbox
from agent_custody_state.stores.outbox_file import OutboxError

FACT: dict[str, Any] = {"space": "o", "subject": "s", "predicate": "p", "actor": "a"}
BOUND = 0.2


def _outcome(call: Callable[[], object], within: float = 5.0) -> object:
    """What ``call`` returned or raised, run on a thread given ``within`` seconds: a call that
    still waits fails the test instead of hanging it."""
    got: list[object] = []

    def run() -> None:
        try:
            got.append(call())
        except Exception as exc:  # what the call raised is the outcome
            got.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(within)
    assert got, f"still waiting after {within}s for a lock holder that never releases it"
    return got[0]


def _refused(call: Callable[[], object], kind: type[Exception], path: Path, pid: int) -> str:
    before = path.read_bytes()
    started = time.monotonic()
    err = _outcome(call)
    assert time.monotonic() - started < 3
    assert isinstance(err, kind), err
    text = str(err)
    assert str(path) in text and f"process {pid}" in text, text
    assert f"lock_timeout={BOUND:g}s" in text and "resume or end it" in text, text
    assert path.read_bytes() == before
    return text


def _fact(fact_id: str = "f1") -> Fact:
    return Fact.from_dict(
        {
            "factId": fact_id,
            "subject": "s",
            "predicate": "p",
            "value": 1,
            "space": "org",
            "validFrom": "2026-01-01T00:00:00.000Z",
            "validTo": None,
            "actor": "a",
            "confidence": None,
            "provenance": "claimed",
            "source": {"receiptId": None},
            "external": {"vectors": "x1"},
        }
    )


def test_the_outbox_waits_a_bounded_time_for_a_stopped_holder(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "ledger.jsonl.outbox"
    outbox = Outbox(path, lock_timeout=BOUND)
    [owed] = outbox.owe([_fact()], "forget", "2026-01-01T00:00:00.000Z")
    with holding(path, stopped=True) as pid:
        text = _refused(lambda: outbox.owe([_fact("f2")], "forget", "t"), OutboxError, path, pid)
        assert "could not record owed removals in" in text and "nothing was changed" in text
        text = _refused(outbox.pending, OutboxError, path, pid)
        assert "could not read the outbox" in text
        # A settle is never the caller's failure (the removal is done): logged, left owed.
        with caplog.at_level(logging.WARNING):
            assert _outcome(lambda: outbox.settle([owed])) is None
        assert f"process {pid}" in caplog.text and "stay owed" in caplog.text
        assert path.exists()
    # Released: the same outbox works again, and the refused calls left nothing behind.
    assert [o.fact_id for o in outbox.pending()] == ["f1"]
    outbox.settle([owed])
    assert not path.exists()


def test_a_checkpoint_waits_the_ledgers_lock_timeout(tmp_path: Path) -> None:
    """The JSONL ledger's own ``lock_timeout`` reaches its checkpoints file: an explicit
    checkpoint is refused, and a write's automatic one is logged while the write stands."""
    path = tmp_path / "ledger.jsonl"
    notes = Path(f"{path}.checkpoints")
    key = Ed25519PrivateKey.generate()
    with Ledger(path, checkpoint_key=key, checkpoint_every=1, lock_timeout=BOUND) as led:
        led.assert_fact(**FACT, value="before")
        with holding(notes, stopped=True) as pid:
            text = _refused(led.checkpoint, EventBackendError, notes, pid)
            assert "could not add a checkpoint to" in text and "nothing was written" in text
            before = notes.read_bytes()
            event = _outcome(lambda: led.assert_fact(**FACT, value="during"))
            assert isinstance(event, AssertEvent) and notes.read_bytes() == before
        assert led.get(event.fact.fact_id) is not None
        led.checkpoint()  # released: checkpoints are written again
    assert len(split_notes(notes.read_text(encoding="utf-8"))) == 2  # at 1 event, and now


def test_a_healthy_holder_is_waited_for_and_the_write_lands(tmp_path: Path) -> None:
    """A holder that releases within the bound is waited for (in the kernel's queue: the
    descriptor the lock was granted on is the one written through, opened as the caller's was,
    for appending), and the owe is written in full after it."""
    path = tmp_path / "ledger.jsonl.outbox"
    path.write_bytes(b"")
    outbox = Outbox(path, lock_timeout=10)
    with holding(path) as pid:
        timer = threading.Timer(0.3, os.kill, (pid, 15))  # ends it: the lock is released
        timer.start()
        started = time.monotonic()
        owed = _outcome(lambda: outbox.owe([_fact()], "forget", "t"))
        timer.join()
    assert time.monotonic() - started >= 0.25
    assert isinstance(owed, list) and [o.fact_id for o in outbox.pending()] == ["f1"]
    assert path.read_bytes().count(b"\n") == 1


def test_the_sidecar_bounds_are_options_with_the_ledgers_default(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "o.outbox")
    assert outbox.lock_timeout == DEFAULT_LOCK_TIMEOUT >= 30
    assert Outbox(tmp_path / "o.outbox", lock_timeout=None).lock_timeout is None
    with pytest.raises(ValueError, match="lock_timeout"):
        Outbox(tmp_path / "o.outbox", lock_timeout=-1)
    with Ledger(tmp_path / "l.jsonl", lock_timeout=7) as led:
        assert getattr(led.backend.checkpoint_log(), "lock_timeout", None) == 7


def test_a_forget_whose_owe_is_refused_changes_nothing(tmp_path: Path) -> None:
    """The flow's owe comes before the ledger change: refused by the bound, the forget changes
    neither the ledger, nor the outbox, nor the store."""
    location = tmp_path / "ledger.jsonl"
    box = tmp_path / "ledger.jsonl.outbox"
    store = InProcessStore("vectors")
    request = AssertRequest(subject="s", predicate="p", value="v", space="org", actor="a")
    with Ledger(location) as ledger:
        outbox = Outbox(box, lock_timeout=BOUND)
        custody = Custody(ledger, StoreSet([store], VerifyPolicy(1, 0)), outbox=outbox)
        fact_id = anyio.run(custody.write, request).event.fact_id
        box.write_bytes(b"")  # as another process's flow left it, mid-owe
        before = location.read_bytes(), box.read_bytes(), dict(store.vendor.rows)
        with holding(box, stopped=True) as pid:
            forget = partial(custody.forget, fact_id=fact_id, actor="dpo", reason="gdpr")
            err = _outcome(lambda: anyio.run(forget))
        assert isinstance(err, OutboxError) and f"process {pid}" in str(err), err
        assert (location.read_bytes(), box.read_bytes(), dict(store.vendor.rows)) == before

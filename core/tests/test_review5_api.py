"""Review 5 of the ``Ledger`` life cycle: calls after ``close()``, a ``close()`` from another
thread while a write is half-way, and constructor arguments of the wrong type
(``ledger/lifecycle.py``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state import Ledger, LedgerError

KEY = Ed25519PrivateKey.generate()
FACT: dict[str, Any] = {"subject": "acct:1", "predicate": "plan", "space": "org", "actor": "a"}


def _location(kind: str, tmp_path: Path) -> str:
    return "memory:" if kind == "memory" else str(tmp_path / "ledger.jsonl")


CALLS: dict[str, Callable[[Ledger, str], Any]] = {
    "assert_fact": lambda led, _: led.assert_fact(**FACT, value=2),
    "assert_many": lambda led, _: led.assert_many([{**FACT, "value": 3}]),
    "validate_assert": lambda led, _: led.validate_assert(**FACT, value=2),
    "retract": lambda led, fid: led.retract(fact_id=fid, actor="a", reason="r"),
    "confirm": lambda led, fid: led.confirm(fact_id=fid, actor="a"),
    "hold": lambda led, fid: led.hold(fact_id=fid, actor="a", reason="r"),
    "forget": lambda led, fid: led.forget(fact_id=fid, actor="a", reason="r"),
    "sweep": lambda led, _: led.sweep(before="2999-01-01T00:00:00Z", actor="a", reason="r"),
    "as_of": lambda led, _: led.as_of(),
    "get": lambda led, fid: led.get(fid),
    "history": lambda led, fid: led.history(fid),
    "count": lambda led, _: led.count(),
    "compact": lambda led, _: led.compact(),
    "enter": lambda led, _: led.__enter__(),
}


@pytest.mark.parametrize("kind", ["memory", "jsonl"])
@pytest.mark.parametrize("call", sorted(CALLS))
def test_every_call_after_close_is_refused_and_writes_nothing(
    kind: str, call: str, tmp_path: Path
) -> None:
    ledger = Ledger(_location(kind, tmp_path))
    fact_id = ledger.assert_fact(**FACT, value=1).fact.fact_id
    backend = ledger.backend
    ledger.close()
    ledger.close()  # a second close does nothing
    with pytest.raises(LedgerError, match="is closed") as refused:
        CALLS[call](ledger, fact_id)
    assert refused.value.code == "closed"
    if kind == "memory":  # nothing to release there: a write used to land silently
        assert backend.count() == 1
    else:
        assert len((tmp_path / "ledger.jsonl").read_text().splitlines()) == 1


@pytest.mark.parametrize("kind", ["memory", "jsonl"])
def test_close_from_another_thread_waits_for_the_write_in_progress(
    kind: str, tmp_path: Path
) -> None:
    ledger = Ledger(_location(kind, tmp_path))
    backend = ledger.backend
    old = ledger.assert_fact(**FACT, value=1)
    inside, go_on = threading.Event(), threading.Event()
    outcome: list[object] = []

    def held_up(_: object) -> None:  # runs inside the write section
        inside.set()
        go_on.wait(10)

    def write() -> None:
        try:
            outcome.append(
                ledger.assert_fact(
                    **FACT, value=2, supersedes=old.fact.fact_id, precondition=held_up
                )
            )
        except Exception as exc:  # recorded: the test says which
            outcome.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    assert inside.wait(10)
    closer = threading.Thread(target=ledger.close)
    closer.start()
    closer.join(0.3)
    assert closer.is_alive(), "close() released the backend under a write in progress"
    go_on.set()
    writer.join(10)
    closer.join(10)
    assert not closer.is_alive()
    [event] = outcome
    assert not isinstance(event, Exception), event
    if kind == "memory":
        assert backend.count() == 2
    else:
        with Ledger(_location(kind, tmp_path)) as again:
            assert [f.value for f in again.as_of()] == [2]
            assert again.count() == 2


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"forget_key": 5}, "forget_key"),
        ({"forget_key": b"key"}, "forget_key"),
        ({"forget_key": "k\ud800"}, "forget_key"),
        ({"chain": "no"}, "chain"),
        ({"chain": None}, "chain"),
        ({"forget_mode": "crypto-shred", "key_store": 5}, "key_store"),
        ({"host": "plugins"}, "host"),
        ({"checkpoint_key": 5}, "checkpoint_key"),
        ({"checkpoint_every": 2}, "checkpoint_every"),
        ({"checkpoint_key": KEY, "checkpoint_every": True}, "checkpoint_every"),
        ({"checkpoint_key": KEY, "checkpoints": 5}, "checkpoints"),
    ],
)
def test_wrong_constructor_arguments_are_refused_before_anything_is_created(
    options: dict[str, Any], field: str, tmp_path: Path
) -> None:
    with pytest.raises(LedgerError) as refused:
        Ledger(tmp_path / "ledger.jsonl", **options)
    assert refused.value.field == field
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("location", [5, None, b"ledger.jsonl", ""])
def test_a_location_of_the_wrong_type_is_refused_naming_it(location: object) -> None:
    with pytest.raises(LedgerError) as refused:
        Ledger(location)  # type: ignore[arg-type]
    assert refused.value.field == "location"


def test_a_closed_ledgers_backend_still_names_itself(tmp_path: Path) -> None:
    """``repair`` printed the backend's kind after its ledger closed; plain attributes still
    read, every call is refused."""
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.close()
    assert (ledger.backend.kind, ledger.location) == ("jsonl", str(tmp_path / "ledger.jsonl"))
    with pytest.raises(LedgerError, match="is closed"):
        ledger.backend.count()

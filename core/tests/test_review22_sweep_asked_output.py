"""A Ctrl-C after a sweep that ran to its end does not cut its output (twenty-second review).

The ``sweep`` command put the default SIGINT/SIGTERM handlers back as soon as the flow returned,
before printing: a Ctrl-C then raised ``KeyboardInterrupt`` in the middle of ``--json`` (exit 130,
the JSON cut or missing), though every fact was forgotten. The ``StopRequest`` now stays installed,
in its ``finishing`` state, until the output is written: one more signal is noted, another still
stops the command at once. Fails without the fix.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state.cli import main, render
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.stores.flows import Custody


def _ledger(tmp_path: Path, count: int) -> str:
    location = str(tmp_path / "l.jsonl")
    with Ledger(location) as ledger:
        custody = Custody(ledger)
        for number in range(count):
            request = AssertRequest(
                subject=f"s{number}", predicate="p", value="v", space="o", actor="a"
            )
            anyio.run(custody.write, request)
    return location


class Cut(BaseException):
    """The test's own handler ran: the command had put it back before its output."""


def _raise(signum: int, frame: Any) -> None:
    raise Cut(signal.Signals(signum).name)


@pytest.fixture(autouse=True)
def _handlers() -> Iterator[None]:
    """The command's caller's handlers: raising ``Cut``, never ending the test run (the
    default SIGTERM handler would end it)."""
    previous = {sig: signal.signal(sig, _raise) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _sweep(location: str) -> int:
    before = "2999-01-01T00:00:00Z"
    return main(["sweep", "--ledger", location, "--before", before, "--reason", "r", "--json"])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_a_finished_sweep_prints_its_json_is_noted(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    sig: signal.Signals,
) -> None:
    location = _ledger(tmp_path, 3)
    printing = render.print_json
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def cut(data: Any) -> None:
        os.kill(os.getpid(), sig)  # Ctrl-C as the JSON is written
        printing(data)

    monkeypatch.setattr(render, "print_json", cut)
    assert _sweep(location) == 0  # the sweep's own status: nothing was stopped
    out, err = capsys.readouterr()
    assert len(json.loads(out)["forgotten"]) == 3
    assert "interrupted" not in json.loads(out)
    assert f"{sig.name}: the sweep has ended; writing what it did" in err
    assert {s: signal.getsignal(s) for s in handlers} == handlers  # put back afterwards


def test_a_second_signal_while_the_output_is_written_still_stops_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    location = _ledger(tmp_path, 1)

    def blocked(data: Any) -> None:  # a write stuck on a full pipe: Ctrl-C, then again
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)
        raise AssertionError("not stopped")

    monkeypatch.setattr(render, "print_json", blocked)
    assert _sweep(location) == 130
    assert "the sweep has ended" in capsys.readouterr().err

"""A second Ctrl-C still leaves ``sweep --json`` printing what was done (twenty-second review).

The first SIGINT/SIGTERM asks the sweep to stop between facts; a second raises
``KeyboardInterrupt`` at once, wherever the main thread is. Raised in the event loop's own code
(a store call being awaited), it left the flow's task to the runner's cancel-all, which kept
the certificates, but the exception that reached the command carried no report: standard output
was empty and the message said the sweep was interrupted "before it began". Raised while the
stopped sweep wrote its certificates, it replaced the exception that would have carried it.
The flow now hands its report to the command's ``StopRequest`` the moment it stops, and a
signal after the sweep ended cannot cut the output. Each test fails without its fix.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from test_review21_sweep_stop import FAR, SCRIPT, _filled, _predicates, sweep_child

from agent_custody_state.cli.sweep_unfinished import StopRequest
from agent_custody_state.stores.flows import Custody

#: the same sweep, whose store takes 30 s per removal: only a stop at once ends it in time
SLOW = SCRIPT.replace("asyncio.sleep(0.5)", "asyncio.sleep(30)")


def _wait_for(stream: Any, text: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line or text in line:
            return


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_second_signal_still_prints_the_json(
    tmp_path: Path, sig: signal.Signals, status: int
) -> None:
    assert SLOW != SCRIPT
    child = sweep_child(tmp_path, SLOW)
    assert child.stderr is not None
    deadline = time.monotonic() + 60
    _wait_for(child.stderr, "REMOVING", deadline)  # awaiting the first fact's store
    child.send_signal(sig)
    _wait_for(child.stderr, "again to stop at once", deadline)
    sent = time.monotonic()
    child.send_signal(sig)  # lands in the event loop, waiting on the store
    out, err = child.communicate(timeout=60)
    assert time.monotonic() - sent < 20, "the second signal did not stop the sweep at once"
    assert child.returncode == status, err
    data = json.loads(out)
    assert data["interrupted"] == sig.name
    assert len(data["forgotten"]) == 5 and len(data["stillHeld"]) == 5
    assert all("certificate" in item for item in data["forgotten"])
    assert sorted(_predicates(tmp_path / "certs")) == sorted(i["factId"] for i in data["forgotten"])
    assert "sweep interrupted after forgetting 5 facts" in err


class Stop:
    """A caller's stop that asks once the first fact's stores were reached, and keeps the
    report the flow hands over."""

    signal = "SIGINT"

    def __init__(self, asked: list[str]) -> None:
        self.asked = asked
        self.swept: Any = None
        self.told = False  # the flow was told to stop: it keeps the certificates now

    def __call__(self) -> bool:
        self.told = self.asked.count("stores") >= 1
        return self.told


def test_a_second_interrupt_while_certificates_are_kept_leaves_the_report(
    tmp_path: Path,
) -> None:
    """The second Ctrl-C lands while the stopped sweep writes its certificates: the
    ``KeyboardInterrupt`` raised there carries no report, but the stop has it, every forgotten
    fact in it."""
    ledger, store, ids = _filled(tmp_path, 4)
    asked: list[str] = []
    stop = Stop(asked)
    custody = Custody(
        ledger, [store], certificate_key=str(tmp_path / "k"), certificates=tmp_path / "certs"
    )
    keep = custody._keep

    async def cut(fact_id: str, certificate: dict[str, Any]) -> Any:
        if stop.told:
            raise KeyboardInterrupt  # the second Ctrl-C
        return await keep(fact_id, certificate)

    custody._keep = cut  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt) as second:
        anyio.run(
            lambda: custody.sweep(
                before=FAR,
                actor="a",
                reason="r",
                progress=lambda stage, done, total: asked.append(stage),
                certificates=True,
                stop=stop,
            )
        )
    assert getattr(second.value, "swept", None) is None
    assert stop.swept is not None
    assert sorted(s.event.fact_id for s in stop.swept.forgotten) == sorted(ids)
    ledger.close()


def test_a_signal_after_the_sweep_ended_does_not_cut_its_output() -> None:
    """While the command writes what a stopped sweep did, one more signal is noted only (a
    ``KeyboardInterrupt`` then cut the JSON half-way); yet another still raises."""
    stop = StopRequest()
    stop._handle(signal.SIGINT, None)
    assert stop.signal == "SIGINT"
    stop.finishing()
    stop._handle(signal.SIGTERM, None)  # noted: the output is not cut
    assert stop.status() == 130  # the first signal's
    with pytest.raises(KeyboardInterrupt):
        stop._handle(signal.SIGINT, None)

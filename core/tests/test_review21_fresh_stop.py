"""Twenty-first review, fresh eyes: the ``sweep`` command's ``StopRequest`` leaves alone a
signal the process was started ignoring, and one whose handler it could not put back.

A shell starts ``agent-custody-memory sweep &`` with Ctrl-C ignored (and a supervisor may
``trap '' TERM``): the handlers were installed over that, so a Ctrl-C meant for the script in
the foreground stopped the background sweep. A handler installed outside Python
(``signal.getsignal`` is None) was replaced, then "restored" with ``signal.signal(sig, None)``,
a ``TypeError`` on the way out of every sweep.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from agent_custody_state.cli.sweep_unfinished import StopRequest


@pytest.fixture
def handlers() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGUSR1 as they were, whatever the test did to them."""
    kept = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)}
    yield
    for sig, handler in kept.items():
        signal.signal(sig, handler)


def _delivered(sig: signal.Signals) -> None:
    """Send ``sig`` to this process and return once Python ran the handlers of what was
    pending: a SIGUSR1 sent after it is handled after it (lower numbers run first)."""
    done = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: done.set())
    os.kill(os.getpid(), sig)
    os.kill(os.getpid(), signal.SIGUSR1)
    for _ in range(2000):  # the handler runs between two bytecodes of this thread
        if done.is_set():
            return
        done.wait(0.001)
    raise AssertionError("SIGUSR1 was not handled")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ignored_at_the_start_stays_ignored(handlers: None, sig: signal.Signals) -> None:
    signal.signal(sig, signal.SIG_IGN)  # as the shell leaves it for ``sweep &``
    stop = StopRequest()
    with stop.installed():
        assert signal.getsignal(sig) == signal.SIG_IGN
        _delivered(sig)
        assert not stop(), "an ignored signal stopped the sweep"
    assert signal.getsignal(sig) == signal.SIG_IGN


def test_the_other_signal_is_still_handled(handlers: None) -> None:
    """Ctrl-C ignored, SIGTERM still asks the sweep to stop, and both are put back."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    before = signal.getsignal(signal.SIGTERM)
    stop = StopRequest()
    with stop.installed():
        _delivered(signal.SIGTERM)
        assert stop.signal == "SIGTERM"
    assert stop.status() == 143
    assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_handler_python_did_not_install_is_left_alone(
    handlers: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM's handler installed by C code (``getsignal`` None, as ``signal.signal`` then
    returns): not replaced, so nothing to put back; SIGINT's is handled and put back."""
    real_signal, real_getsignal = signal.signal, signal.getsignal
    calls: list[signal.Signals] = []

    def from_c(sig: int) -> Any:
        return None if sig == signal.SIGTERM else real_getsignal(sig)

    def installing(sig: int, handler: Any) -> Any:
        calls.append(signal.Signals(sig))
        previous = real_signal(sig, handler)
        return from_c(sig) if sig == signal.SIGTERM else previous

    monkeypatch.setattr(signal, "getsignal", from_c)
    monkeypatch.setattr(signal, "signal", installing)
    before = real_getsignal(signal.SIGINT)
    with StopRequest().installed():  # a TypeError on the way out before
        pass
    assert signal.SIGTERM not in calls
    assert real_getsignal(signal.SIGINT) is before

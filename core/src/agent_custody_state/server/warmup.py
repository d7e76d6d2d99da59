"""The chain head of a ledger whose last event has no chain record, computed at start-up in a
child process, off the ledger's thread and out of the server's interpreter.

A ledger written only by the TypeScript original (or last written by a batch with
``chain=False``) carries no chain record at its end. The first call that needs the head (a
write, which links onto it; the head resource; a certificate's "head before") then computes
it: back to the last record, or over every event when there is none, which on an original's
ledger of ten million events takes about a minute, on the ledger's one thread, while every
other call waits. The server starts that computation as it starts, in a child process
(``python -m agent_custody_state.server.warmup``, the location on its stdin, never on its
command line, where a password would show) that opens the same ledger, computes the head after
its last event (``chain.head_after``: exact even if more is appended meanwhile) and prints it;
a thread of the server waits for the answer and hands it to the ledger's backend
(``EventBackend.remember_head``). A call that needs the head before then computes it itself, as
without this. A process, not a thread: the pass is CPU-bound Python, and in a thread it would
slow every other call of the server for its whole length.

Only for a backend other processes may share (``EventBackend.shared``: a second instance of a
``memory:`` ledger would be another, empty ledger), and a ledger of at least ``WARM_AT``
events: below that the head takes a fraction of a second wherever it is first needed.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading

from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state.ledger.chain import ChainHead, chain_record, head_after

log = logging.getLogger(__name__)

#: Events from which a head without a record is computed at start-up (about 0.1 s of work).
WARM_AT = 10_000


def needs_warming(backend: EventBackend, count: int) -> bool:
    """Whether the head after the last event of this ledger of ``count`` events should be
    computed at start-up: its last event carries no chain record, and a second instance of
    the backend sees the same events. (On the ledger's thread: one read.)"""
    if not backend.shared or count < WARM_AT:
        return False
    last = backend.last_event()
    return last is not None and chain_record(last) is None


class Warmup:
    """The child computing the head, and the thread waiting for it; ``stop`` ends both."""

    def __init__(self, backend: EventBackend, location: str) -> None:
        self._backend = backend
        self._child = subprocess.Popen(
            [sys.executable, "-m", __name__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            # UTF-8 both ways whatever the locale (the child's stdin was read as ASCII under
            # PYTHONIOENCODING=ascii); surrogateescape carries a path's non-UTF-8 bytes.
            encoding="utf-8",
            errors="surrogateescape",
        )
        self._thread = threading.Thread(
            target=self._wait, args=(location,), name="acs-chain-head", daemon=True
        )
        self._thread.start()

    def _wait(self, location: str) -> None:
        try:
            out, err = self._child.communicate(location)
            if self._child.returncode != 0:
                # The error's last line only: the backends' messages show the location
                # without its password, a traceback's other lines need not.
                why = (err.strip().splitlines() or [f"exit {self._child.returncode}"])[-1]
                log.warning("could not compute the chain head at start-up: %s", why)
                return
            answer = json.loads(out)
            if answer is None:
                return  # the child found a record at the end: nothing to compute
            head = ChainHead(answer["seq"], answer["hash"], chained=False)
            self._backend.remember_head(answer["event"], head)
            log.info(
                "chain head after %s computed at start-up (%d events)", answer["event"], head.seq
            )
        except Exception:
            log.warning("could not compute the chain head at start-up", exc_info=True)

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def stop(self) -> None:
        """End the child if it still runs (the server is stopping)."""
        if self._child.poll() is None:
            self._child.kill()
        self._thread.join(5)


def _main() -> int:
    """The child: the ledger's location on stdin; prints the head after its last event as
    ``{"event", "seq", "hash"}``, or ``null`` when the last event carries a record."""
    # Run as ``-m``, the package was imported first, and with it the plugin host.
    from agent_custody_state.ledger.host import default_host

    location = sys.stdin.buffer.read().decode("utf-8", "surrogateescape")
    with default_host().open_backend(location) as backend:
        last = backend.last_event()
        if last is None or chain_record(last) is not None:
            print("null")
            return 0
        head = head_after(last, backend.stored_events, backend.events_newest_first)
    print(json.dumps({"event": last.event_id, "seq": head.seq, "hash": head.hash}))
    return 0


if __name__ == "__main__":
    sys.exit(_main())

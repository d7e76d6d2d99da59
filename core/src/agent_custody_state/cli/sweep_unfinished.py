"""The words of a ``sweep`` command that did not finish: stopped by a fact's error, interrupted
by Ctrl-C, or done with certificates it could not keep. Each says what stands (the facts
forgotten before), and who finishes what they are owed.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from typing import Any


def plural(count: int, word: str) -> str:
    """``1 fact``, ``2 facts``."""
    return f"{count} {word}{'' if count == 1 else 's'}"


def not_kept(report: Any, archive: Any, *, printed: bool) -> str:
    """``; N certificates could not be kept in DIR ...`` (and each printed on standard output,
    unless ``--json`` printed them already), or empty. Every forget is done and cannot be
    certified again (its byte scan needed the value): exit 1, as for a store still holding."""
    ours = {swept.event.fact_id for swept in report.forgotten}  # not those the start finished
    missing = set(archive.not_kept) & ours if archive is not None else set()
    if not missing:
        return ""
    from agent_custody_state.stores.sweep_stopped import some

    if not printed:
        for swept in report.forgotten:
            if swept.event.fact_id in missing and swept.certificate is not None:
                sys.stdout.write(json.dumps(swept.certificate, indent=2) + "\n")
        sys.stdout.flush()
    return (
        f"; {plural(len(missing), 'certificate')} could not be kept in {archive.folder} (facts "
        f"{some(sorted(missing))}; the log says why): the facts are forgotten, and the "
        "certificates are printed on standard output: keep them, they cannot be issued again"
    )


def stopped(exc: Exception, report: Any, archive: Any, *, printed: bool) -> str:
    """The error of a sweep a fact stopped, true of the sweep, as ``memory.sweep`` says it
    (``stores.sweep_stopped``), then the certificates not kept (``printed``: by ``--json``)."""
    from agent_custody_state.stores.sweep_stopped import stopped_text

    return stopped_text(exc, report) + not_kept(report, archive, printed=printed)


def interrupted(
    exc: KeyboardInterrupt, report: Any, archive: Any, outbox: Any, stores: bool
) -> str:
    """What a sweep Ctrl-C (or SIGTERM) stopped had done: the facts forgotten before it (the
    flow's ``report``, ``stores.sweep_interrupt``; the ledger's own account in ``exc``
    otherwise: ``ledger.stopped``), which stand, the certificates kept, and who finishes what
    is owed.
    The flow contacts no store after the stop: the removals not made wait in the outbox, the
    certificates not kept in the erasure intent, for the next start."""
    from agent_custody_state.ledger.stopped import stopped_result
    from agent_custody_state.stores.sweep_interrupt import owed_by_stop
    from agent_custody_state.stores.sweep_stopped import some

    result = stopped_result(exc)
    if report is not None:
        done = [swept.event.fact_id for swept in report.forgotten]
        unasked = [s.event.fact_id for s in report.forgotten if owed_by_stop(s.removal)]
    elif result is not None:
        done = unasked = [event.fact_id for event in result.forgotten]
    else:  # before it began
        return "sweep interrupted; run it again to finish (a fact forgotten stays forgotten)"
    if not done:
        return "sweep interrupted before it forgot any fact"
    text = (
        f"sweep interrupted after forgetting {plural(len(done), 'fact')} ({some(done)}); "
        "those erasures stand"
    )
    owed = []
    if unasked and stores:
        if outbox is not None:
            owed.append(
                f"the removals of {plural(len(unasked), 'fact')} from the stores are kept "
                f"in {outbox.path}"
            )
        else:
            text += f"; the removals of {plural(len(unasked), 'fact')} from the stores were "
            text += "not finished, and no outbox keeps what they are owed"
    if archive is not None:
        from agent_custody_state.stores.archive import file_name

        folder = archive.folder
        missing = [f for f in done if not (folder / f"{file_name(f)}.json").exists()]
        text += f"; their certificates are kept in {archive.folder}"
        if missing:
            owed.append(f"those of {plural(len(missing), 'fact')} as an intent there")
    if owed:
        text += f"; {' and '.join(owed)}, for the next sweep, forget or server start to finish"
    return text + "; run the sweep again to forget the rest"


class StopRequest:
    """SIGINT and SIGTERM while a ``sweep`` runs (``installed``): the first asks the sweep to
    stop before its next fact (``Custody.sweep(stop=self)``), so it keeps every forgotten
    fact's certificate on its way out; a second stops it at once (``KeyboardInterrupt``).
    Before, the first Ctrl-C only cancelled the command's task: the flow ran on for up to 30
    seconds (``stores.finish``) and was then cut, its report and certificates dropped, and
    SIGTERM killed the process outright.

    What the sweep did is kept here (``swept``) the moment it stops
    (``stores.sweep_interrupt.StopCheck``): the second ``KeyboardInterrupt`` may be raised in
    the event loop's own code, outside the flow, and then carries no report. Once the sweep has
    ended (``finishing``), one more signal is noted, not raised, so it cannot cut the output
    half-way; yet another raises (a write blocked on a full pipe can still be stopped). The
    handlers stay until the output of a sweep that ran to its end is written, too: restored
    before it, a Ctrl-C then cut the ``--json`` half-way."""

    def __init__(self) -> None:
        #: the name of the signal that asked, once one has
        self.signal: str | None = None
        #: the report of what the stopped sweep did (``SweepReport``), handed over by the flow
        self.swept: Any = None
        self._spare = 0  # signals still to be noted, not raised (``finishing``)
        self._ended = False  # the sweep has ended (``finishing``): a signal no longer stops it

    def __call__(self) -> bool:
        return self.signal is not None

    def _handle(self, signum: int, frame: Any) -> None:
        import signal

        if self._spare:  # the sweep has ended: noted, not raised
            self._spare -= 1
            if self.signal is None:  # it ran to its end: its exit status stands
                sys.stderr.write(
                    f"agent-custody-memory: {signal.Signals(signum).name}: the sweep has ended; "
                    "writing what it did (again to stop at once)\n"
                )
            return
        if self.signal is not None or self._ended:
            raise KeyboardInterrupt
        self.signal = signal.Signals(signum).name
        sys.stderr.write(
            f"agent-custody-memory: {self.signal}: stopping the sweep after the current fact "
            "(again to stop at once)\n"
        )

    def finishing(self) -> None:
        """The sweep has ended (stopped, failed or done) and its output is being written: the
        next signal is noted only (the exit status stays the first one's, or the sweep's own
        when none stopped it); yet another raises."""
        self._spare = 1
        self._ended = True

    @contextlib.contextmanager
    def installed(self) -> Iterator[StopRequest]:
        """The handlers, for the block's time. Left as they are: off the main thread; a signal
        the process was started ignoring (a shell's ``sweep &`` ignores Ctrl-C, a supervisor's
        ``trap '' TERM``: a caught one stopped the sweep those meant to spare); and one whose
        handler Python did not install (``getsignal`` None: it could not be put back)."""
        import signal

        previous: dict[signal.Signals, Any] = {}
        try:
            for sig in (signal.SIGINT, signal.SIGTERM):
                if signal.getsignal(sig) in (signal.SIG_IGN, None):
                    continue
                previous[sig] = signal.signal(sig, self._handle)
        except ValueError:  # not the main thread
            pass
        try:
            yield self
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)

    def status(self) -> int:
        """The exit status of a sweep stopped so: 128 + the signal's number (130 for SIGINT)."""
        import signal

        return 128 + int(signal.Signals[self.signal or "SIGINT"])

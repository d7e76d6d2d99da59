"""The ledger part of a sweep's progress as one count over all its passes (``sweeping``).

A sweep under retention windows (or a scoped caller's, one pass per space it may sweep) runs
``Ledger.sweep`` once per space, and each reports ``(done, total)`` of its own pass. Handed on
as they came, the count went back to 0 at every pass and its total changed: a command line's
bar filled, emptied and filled again, and ``memory.sweep``'s growing number stalled through the
later passes and then counted the stores' part from the wrong base. ``PassProgress`` turns them
into one count that only grows, over a total that covers every pass (the later passes counted
before the first starts), and ends at that total.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Report = Callable[[str, int, int], None]


class PassProgress:
    """``progress("ledger", done, total)`` across the passes of one sweep.

    ``later``: how many facts each pass after the first would consider, counted before the
    sweep starts (a pass's own count replaces its estimate when it runs, so the total stays true
    if another writer changed the ledger meanwhile)."""

    def __init__(self, report: Report, later: Sequence[int]) -> None:
        self._report = report
        self._later = list(later)
        self._offset = 0  # the facts of the passes already run
        self._pass_total = 0
        self._last: tuple[int, int] | None = None

    def _send(self, done: int, total: int) -> None:
        if (done, total) != self._last:
            self._last = (done, total)
            self._report("ledger", done, total)

    def for_pass(self) -> Callable[[int, int], None]:
        """The ``progress`` for ``Ledger.sweep`` of the next pass."""
        self._pass_total = 0

        def report(done: int, total: int) -> None:
            self._pass_total = total
            rest = sum(self._later)
            self._send(self._offset + done, self._offset + total + rest)

        return report

    def pass_done(self) -> None:
        """The pass ran to its end: its facts count as done; the next pass's estimate goes."""
        self._offset += self._pass_total
        if self._later:
            self._later.pop(0)

    def finish(self) -> None:
        """Every pass ran: the count ends at its total (also when the last passes were empty)."""
        if self._last is not None or self._offset:
            self._send(self._offset, self._offset)

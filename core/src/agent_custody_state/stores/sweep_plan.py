"""What a sweep would do and when its windows are measured (``sweeping``): the cutoffs of its
passes (one per space under retention windows), ``plan_sweep`` (``sweep --dry-run``), which
changes nothing, and ``measured_at``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent_custody_state.ledger.arguments import required_time_arg
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.requests import TimeLike
from agent_custody_state.ledger.retention import RetentionPolicy
from agent_custody_state.stores.reports import SweepPreview
from agent_custody_state.timeutil import TimeFormatError, format_time, parse_time

SWEEP_NEEDS_BEFORE = "sweep needs `before`, or a server started with retention windows"


class SweepPlanning:
    """``plan_sweep``, ``measured_at`` and the cutoffs; ``flows.Custody`` provides the rest."""

    ledger: Ledger
    retention: RetentionPolicy | None
    run: Any

    async def plan_sweep(
        self,
        *,
        before: TimeLike | None = None,
        space: str | None = None,
        holders: bool = False,
        at: TimeLike | None = None,
    ) -> SweepPreview:
        """What ``sweep`` with these arguments would forget and keep, changing nothing.
        ``holders``: also name the stores holding each fact now (a query per fact). ``at``:
        as ``sweep``'s; a sweep given the same ``at`` forgets what this lists, but for the
        facts held, forgotten or retracted meanwhile."""
        if before is None and self.retention is None:
            raise LedgerError(SWEEP_NEEDS_BEFORE, field="before")

        def plan() -> SweepPreview:
            preview = SweepPreview(
                time_text(before), self.retention if before is None else None, space
            )
            for where, cutoff in self._cutoffs(before, space, None, at):
                found = self.ledger.plan_sweep(cutoff, where)
                preview.forget.extend(found.forget)
                preview.held.extend(found.held)
            if holders:
                for event in preview.forget:
                    preview.holders[event.fact_id] = sorted(
                        self.ledger.current_external(event.fact_id)
                    )
            return preview

        preview: SweepPreview = await self.run(plan)
        return preview

    def _cutoffs(
        self,
        before: TimeLike | None,
        space: str | None,
        within: Callable[[str], bool] | None = None,
        at: TimeLike | None = None,
    ) -> list[tuple[str | None, Any]]:
        if before is not None and at is not None:
            raise LedgerError("at: measures the retention windows, not a `before`", field="at")
        names: list[str] | None = [space] if space is not None else None
        if names is None and within is not None:
            names = [name for name in self.ledger.spaces() if within(name)]
        if before is not None:
            return [(space, before)] if names is None else [(name, before) for name in names]
        assert self.retention is not None
        now = parse_time(self.measured_at(at))
        plan: list[tuple[str | None, Any]] = []
        for name in names if names is not None else self.ledger.spaces():
            window = self.retention.window_for(name)
            if window is not None:
                plan.append((name, format_time(window[1].before(now))))
        return plan

    def measured_at(self, at: TimeLike | None = None) -> str:
        """The instant the retention windows are measured from: ``at``, or the clock's now.
        An ``at`` may pin a dry run's instant for the sweep after it, never run ahead of the
        clock: a later instant would forget what the windows still keep."""
        now = self.ledger.now()
        if at is None:
            return now
        pinned = required_time_arg(at, "at")
        if pinned > now:
            raise LedgerError(
                f"at: {pinned} is after now ({now}): the windows are measured from the present "
                "or an instant before it, never ahead of the clock",
                field="at",
            )
        return pinned


def time_text(value: TimeLike | None) -> str | None:
    """``before`` as the ledger writes times (UTC, milliseconds, ``Z``), as ``memory.sweep`` and
    ``sweep --json`` report it; a text that does not parse is left for the ledger to refuse."""
    if value is None:
        return None
    try:
        return format_time(parse_time(value))
    except TimeFormatError:
        return value if isinstance(value, str) else None

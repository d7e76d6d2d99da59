"""A deterministic clock for ledger tests: starts at a fixed instant, advances 1 ms per reading."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class StepClock:
    """Callable clock; ``advance(...)`` jumps, each call moves time forward by ``step``."""

    def __init__(
        self,
        start: datetime = datetime(2026, 9, 1, tzinfo=UTC),
        step: timedelta = timedelta(milliseconds=1),
    ) -> None:
        self.now = start
        self.step = step

    def __call__(self) -> datetime:
        self.now += self.step
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)

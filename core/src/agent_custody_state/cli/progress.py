"""Progress bars for long commands (``import``, ``export``, ``sweep``; ``verify``, ``eval``).

Drawn with rich on standard error, and only when standard error is a terminal: a cron job, a
pipe or a test gets no bar and no escape codes (rich is not even imported then). Standard output
stays free for data (``export --out -``).

    with progress_bars() as bars:
        advance = bars.add("exporting", total=ledger.count())
        for event in ledger.export():
            ...
            advance(1)

A flow that reports ``(stage, done, total)`` (``Custody.sweep``'s ``progress``) gets a bar per
stage from ``bars.stages({"ledger": "forgetting", "stores": "removing from stores"})``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TextIO

Advance = Callable[[int], None]


def _nothing(_steps: int) -> None:
    return None


class Bars:
    """The bars of one command; every method is a no-op when the bars are off."""

    def __init__(self, progress: Any = None) -> None:
        self._progress = progress  # a rich Progress, or None when off

    @property
    def on(self) -> bool:
        return self._progress is not None

    def add(self, description: str, total: int | None = None) -> Advance:
        """A new bar; returns ``advance(steps)``. ``total=None`` draws an open-ended bar."""
        if self._progress is None:
            return _nothing
        progress = self._progress
        task = progress.add_task(description, total=total)

        def advance(steps: int) -> None:
            progress.advance(task, steps)

        return advance

    def stages(self, descriptions: Mapping[str, str]) -> Callable[[str, int, int], None]:
        """``report(stage, done, total)`` for a flow: one bar per stage, created on first use."""
        tasks: dict[str, Any] = {}

        def report(stage: str, done: int, total: int) -> None:
            if self._progress is None:
                return
            if stage not in tasks:
                tasks[stage] = self._progress.add_task(descriptions.get(stage, stage), total=total)
            self._progress.update(tasks[stage], completed=done, total=total)

        return report


def is_terminal(stream: TextIO) -> bool:
    """A terminal, that is; never for pipes, files, cron or tests."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


@contextmanager
def progress_bars(stream: TextIO | None = None, *, enabled: bool | None = None) -> Iterator[Bars]:
    """Bars on ``stream`` (default standard error) while the block runs; ``enabled`` overrides
    the terminal check (tests draw into a buffer with it)."""
    stream = stream if stream is not None else sys.stderr
    if not (is_terminal(stream) if enabled is None else enabled):
        yield Bars()
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = Console(file=stream, force_terminal=enabled or None)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
    )
    with progress:
        yield Bars(progress)

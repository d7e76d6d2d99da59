"""``notifications/progress`` for ``memory.sweep``, when the caller asked with a ``progressToken``.

A sweep forgets fact after fact in the ledger, then removes each forgotten fact from the stores:
over slow vendor stores that is minutes, past a client's request timeout (the TypeScript SDK's
is 60 s, reset by progress when the client asks it to). The sweep reports each step
(``stores.sweeping.SweepProgress``, called on the ledger's worker thread for the ledger's part);
``Progress`` turns those reports into notifications:

- one number that only grows: the facts forgotten in the ledger, then that count plus the
  removals done (its total is unknown until the ledger's part ends, so none is sent); the
  message says which part and how far;
- reports arriving faster than the client takes notifications are coalesced: the latest is sent;
- every notification is sent before the result (``finish`` waits for the last), and none after
  a cancel (the sender is cancelled with the call).

Only on asyncio, where a worker thread can wake the sender without waiting for it; elsewhere
(trio) no progress is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

T = TypeVar("T")
Report = Callable[[float, float | None, str | None], Awaitable[None]]


class Progress:
    """A ``SweepProgress`` callable (any thread) feeding one call's progress notifications."""

    def __init__(self, report: Report, loop: asyncio.AbstractEventLoop) -> None:
        self._report = report
        self._loop = loop
        self._lock = threading.Lock()
        self._ledger_total = 0
        self._latest: tuple[float, str] | None = None
        self._sent = -1.0
        self._wake = asyncio.Event()
        self._closed = False

    def __call__(self, stage: str, done: int, total: int) -> None:
        """Called amid the sweep (in the ledger's forgets, on its thread): never raises."""
        if self._closed:
            return  # the call was cancelled or is done: nothing more is sent
        with contextlib.suppress(Exception):  # the loop is gone (a stop): the sweep goes on
            self._note(stage, done, total)

    def _note(self, stage: str, done: int, total: int) -> None:
        with self._lock:
            if stage == "ledger":
                self._ledger_total = total
                value, part = float(done), "forgetting in the ledger"
            else:
                value, part = float(self._ledger_total + done), "removing from the stores"
            if value <= self._sent or (self._latest is not None and value <= self._latest[0]):
                return  # progress only grows: a repeated report is not sent twice
            self._latest = (value, f"{part}: {done} of {total}")
        self._loop.call_soon_threadsafe(self._wake.set)

    def _take(self) -> tuple[float, str] | None:
        with self._lock:
            latest, self._latest = self._latest, None
            if latest is not None:
                self._sent = latest[0]
            return latest

    async def run(self) -> None:
        """Send the reports as they come, until ``finish``."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            latest = self._take()
            if latest is not None:
                await self._report(latest[0], None, latest[1])
            if self._closed and self._latest is None:
                return

    def finish(self) -> None:
        """No more reports: ``run`` sends the last one queued, then returns."""
        self._closed = True
        self._wake.set()


def progress_for(ctx: Any, meta: Any) -> Progress | None:
    """A ``Progress`` for the request of ``ctx`` when its ``_meta`` holds a ``progressToken``
    (and the loop is asyncio's), else None."""
    # The SDK's parsed ``_meta`` names it ``progress_token``; a raw mapping ``progressToken``.
    token = meta.get("progress_token", meta.get("progressToken")) if hasattr(meta, "get") else None
    if token is None or isinstance(token, bool):
        return None
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    return Progress(ctx.session.report_progress, loop)


async def with_progress(progress: Progress | None, call: Awaitable[T]) -> T:
    """Await ``call`` while ``progress`` sends its notifications; the last is sent before this
    returns."""
    if progress is None:
        return await call
    async with anyio.create_task_group() as group:
        group.start_soon(progress.run)
        try:
            result = await call
        finally:
            progress.finish()
    return result

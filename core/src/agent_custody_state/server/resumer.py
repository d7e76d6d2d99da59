"""Owed work finished while the server runs: ``Custody.resume`` every ``resume_every`` seconds.

At start the server finishes what the outbox and the erasure intents hold (``stores.outbox``,
``stores.orphan_resume``, ``stores.intents``); without more, what became owed while it ran (a
failed put's cleanup, a store that was down, a put the vendor may still land for its
``settle_seconds``) waited for the next restart. ``resuming`` runs the same resume in the
background, every ``every`` seconds after the start's (0: never):

- **One pass at a time**: one task runs the passes one after another, never two at once.
- **Never in a tool call's way**: a pass is one more client of the ledger's worker (short reads,
  queued with the calls') and of the stores; entries a flow of this process has in flight are
  left to it (``Outbox.in_flight``), intents alike (``intents._LIVE``).
- **Quiet while nothing changes**: a pass logs as the start's resume does, but a line the
  previous pass already logged is left out (``Repeats``; one DEBUG line counts them), so a store
  that stays down is named when it fails, not every period. The resumer's own line says what
  a pass finished (INFO) and, when the set of entries still owed changes, how many are owed
  (WARNING) or that none is any more (INFO).
- **Bounded by the stop**: a stop cancels the wait for the next pass at once, and lets a pass
  that is running finish for at most ``stop_seconds``; then it is cut, as a kill would cut it,
  and what it did not finish stays owed for the next pass or start (the outbox is made for
  that). ``stopping`` (the HTTP server's draining) keeps a pass from starting during a stop.

Asyncio only (the transports run on it); under another loop nothing is started (a WARNING).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio

from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.outbox import Resumed

log = logging.getLogger(__name__)

#: How long a stop lets a running pass finish before it is cut.
STOP_SECONDS = 5.0

#: The resumer whose pass is running in this context (its task, the worker calls it makes).
_PASS: contextvars.ContextVar[Repeats | None] = contextvars.ContextVar(
    "agent_custody_resume_pass", default=None
)

Key = tuple[str, int, str]


class Repeats(logging.Filter):
    """On the root logger's handlers while a resumer runs: a record logged by one of its passes
    that the previous pass logged too (same logger, level and text) is left out."""

    def __init__(self) -> None:
        super().__init__()
        self.before: set[Key] = set()
        self.now: set[Key] = set()
        self.left_out: set[Key] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if _PASS.get() is not self:
            return True
        key = (record.name, record.levelno, record.getMessage())
        self.now.add(key)
        if key in self.before:
            self.left_out.add(key)
            return False
        return True

    def next_pass(self) -> int:
        """End a pass: what it logged is what the next one leaves out. The lines left out."""
        left_out = len(self.left_out)
        self.before, self.now, self.left_out = self.now, set(), set()
        return left_out


class PeriodicResume:
    """``custody.resume()`` every ``every`` seconds, in one background task (``start``)."""

    def __init__(
        self,
        custody: Custody,
        every: float,
        *,
        stop_seconds: float = STOP_SECONDS,
        stopping: Callable[[], bool] | None = None,
    ) -> None:
        if not every > 0:
            raise ValueError(f"resume_every must be more than 0 seconds here, not {every!r}")
        self.custody, self.every, self.stop_seconds = custody, every, stop_seconds
        self.stopping = stopping or (lambda: False)
        self.repeats = Repeats()
        self.passes = 0  # passes finished (or failed)
        self.owed: set[str] = set()  # entries still owed after the last pass
        self._failure: str | None = None  # the last pass's failure, if it failed
        self._task: asyncio.Task[None] | None = None
        self._busy = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())
        for handler in logging.getLogger().handlers:
            handler.addFilter(self.repeats)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            if self.stopping():
                return
            self._busy = True
            try:
                await self.once()
            finally:
                self._busy = False

    async def once(self) -> Resumed | None:
        """One pass; its outcome logged (``_report``). A failure is logged, never raised."""
        # The pass's context: its records, and those of the worker calls and tasks it makes.
        token = _PASS.set(self.repeats)
        failure: str | None = None
        done: Resumed | None = None
        try:
            done = await self.custody.resume()
        except Exception as exc:
            failure = f"{type(exc).__name__}: {exc}"
        finally:
            _PASS.reset(token)
            self.passes += 1
            left_out = self.repeats.next_pass()
        if left_out:
            log.debug("resume: %d log lines as the previous pass's left out", left_out)
        if failure is not None and failure != self._failure:
            log.warning("resume: a pass failed (%s); the next is in %gs", failure, self.every)
        self._failure = failure
        self._report(done)
        return done

    def _report(self, done: Resumed | None) -> None:
        if done is None:
            return
        ours = f"in flight in process {os.getpid()}"  # a flow of this process finishes these
        owed = {entry for entry, why in done.left.items() if why != ours}
        if done.finished or done.dropped:
            log.info(
                "resume: finished the store removals or cleanups of %d facts, dropped %d entries "
                "whose ledger change never committed",
                len(done.finished),
                len(done.dropped),
            )
        if owed != self.owed:
            if owed:
                log.warning(
                    "resume: %d store removals or cleanups still owed (the log above says why); "
                    "tried again every %gs",
                    len(owed),
                    self.every,
                )
            else:
                log.info("resume: nothing is owed to the stores any more")
        self.owed = owed

    async def stop(self) -> None:
        """End the task: at once between passes, else once the pass ends, at most
        ``stop_seconds`` (then the pass is cut: what it left stays owed)."""
        for handler in logging.getLogger().handlers:
            handler.removeFilter(self.repeats)
        task, self._task = self._task, None
        if task is None:
            return
        if not self._busy:
            task.cancel()
        with anyio.CancelScope(shield=True):
            finished, _ = await asyncio.wait({task}, timeout=self.stop_seconds)
            if not finished:
                log.warning(
                    "resume: the pass running at the stop was cut after %gs; what it did not "
                    "finish stays owed for the next start",
                    self.stop_seconds,
                )
                task.cancel()
                await asyncio.wait({task}, timeout=1.0)
        if task.done() and not task.cancelled() and task.exception() is not None:
            log.error("resume: the background task ended: %r", task.exception())


@asynccontextmanager
async def resuming(
    custody: Custody,
    every: float,
    *,
    stopping: Callable[[], bool] | None = None,
    stop_seconds: float = STOP_SECONDS,
) -> AsyncIterator[PeriodicResume | None]:
    """Resume ``custody`` every ``every`` seconds while the block runs (0: never; None is
    yielded then, and under a loop other than asyncio)."""
    if not every > 0:
        yield None
        return
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        log.warning("resume_every needs asyncio; owed work is finished at the next start only")
        yield None
        return
    resumer = PeriodicResume(custody, every, stop_seconds=stop_seconds, stopping=stopping)
    resumer.start()
    try:
        yield resumer
    finally:
        await resumer.stop()

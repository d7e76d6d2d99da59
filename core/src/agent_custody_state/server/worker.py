"""One dedicated thread for every ledger call, so the event loop never waits on disk or network.

Why one thread and not a pool: event backends (a SQLite connection, a Postgres connection, the
JSONL index) are safe to use from one thread at a time, not necessarily from any thread, and the
ledger's own rules are checked inside a store transaction anyway, so a pool would buy little
but risk. Calls queue in order; the loop stays free to accept, validate and answer other calls.

A backend that declares it never blocks (``EventBackend.blocking = False``, the in-memory one)
is called inline (``inline=True``): a thread hop would cost more than the call.

A call made on the worker thread itself (a hook the ledger runs there, such as
``event_appended``, using the worker again) runs inline too: queued behind the call that made
it, it waited for ever, and the worker with it. Calls from other threads (the event loop,
``asyncio.to_thread``) need no worker: the ledger's backends serialise them (docs/decisions.md).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import anyio

from agent_custody_state.ledger.ledger import Ledger

T = TypeVar("T")


class LedgerWorker:
    """Runs blocking callables on a single worker thread; ``await worker.run(fn, ...)``."""

    def __init__(self, name: str = "ledger", *, inline: bool = False) -> None:
        self.inline = inline
        self._here = threading.local()  # ``mine`` is set on the worker thread (``_on_worker``)
        self._executor = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=name, initializer=self._started
        )
        # Fallback for non-asyncio loops (trio): a limiter of one keeps calls serial.
        self._limiter = anyio.CapacityLimiter(1)
        self._closed = False
        self._lock = threading.Lock()

    def _started(self) -> None:
        self._here.mine = True

    def _on_worker(self) -> bool:
        return getattr(self._here, "mine", False)

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        call = functools.partial(fn, *args, **kwargs)
        if self.inline or self._on_worker():
            return call()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not asyncio (trio): anyio's threads, one at a time
            return await anyio.to_thread.run_sync(call, limiter=self._limiter)
        # The caller's context variables go along (the MCP log collects the call's records).
        return await loop.run_in_executor(self._executor, contextvars.copy_context().run, call)

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run on the worker thread and wait, from synchronous code (startup, shutdown)."""
        if self.inline or self._on_worker():
            return fn(*args, **kwargs)
        return self._executor.submit(functools.partial(fn, *args, **kwargs)).result()

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                # From the worker thread itself (a hook stopping the server), the calls queued
                # still run; the thread cannot wait for its own end.
                self._executor.shutdown(wait=not self._on_worker())


def worker_for(ledger: Ledger) -> LedgerWorker:
    """A worker suited to the ledger's backend (inline when the backend never blocks)."""
    return LedgerWorker(inline=not ledger.backend.blocking)

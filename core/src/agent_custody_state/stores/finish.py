"""A flow between the ledger and the stores runs to its end when its caller is cancelled.

A caller that hangs up between the ledger and the stores must not leave the two disagreeing:
a write's puts are made before the append, a retraction's put-back is recorded by the ledger,
and a forget's removals follow its commit. anyio's shield holds against anyio's cancels, but
asyncio's own (``task.cancel``, ``wait_for``, uvicorn's cancel after its grace, ``asyncio.run``'s
cancel-all) go through it; so under asyncio the flow runs in a task of its own, which a
cancelled caller waits for, at most ``FINISH_SECONDS``, before it is cut and an ERROR says so
(docs/decisions.md, "Long-lived server state and the stop, sixth review"). One cancel reaches
the flow's own task too: ``asyncio.run``'s cancel-all of every task left when its main
coroutine returns; the HTTP server waits for its flows before that (``drain.outlast``), and a
program of its own that runs flows should await them before returning.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

import anyio

from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.maskedtrace import log_traceback, type_name
from agent_custody_state.stores.storeset import StoreWriteError

T = TypeVar("T")
log = logging.getLogger(__name__)

#: How long a flow still runs after its caller's asyncio cancel, at most.
FINISH_SECONDS = 30.0


async def finish(flow: Coroutine[Any, Any, T]) -> T:
    """Await ``flow`` shielded: asyncio's own cancels (``wait_for``, a server's stop) ignore anyio's
    shield, so the flow runs in its own task, which a cancelled caller awaits (bounded) first."""
    with anyio.CancelScope(shield=True):
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # trio: the shield is enough
            return await flow
        task = loop.create_task(flow)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            deadline = loop.time() + FINISH_SECONDS
            while not task.done() and loop.time() < deadline:
                with contextlib.suppress(asyncio.CancelledError):  # later cancels: the same
                    await asyncio.wait({task}, timeout=deadline - loop.time())
            if not task.done():
                log.error("a flow whose caller was cancelled did not end in time: cut")
                task.cancel()
                task.add_done_callback(lambda done: done.cancelled() or done.exception())
            elif not task.cancelled() and (error := task.exception()) is not None:
                _failed(error)
            raise
    raise AssertionError("unreachable: a shield never swallows an exception")


def _failed(error: BaseException) -> None:
    """Log what a flow whose caller was cancelled raised: nobody is left to raise it to, and
    what went wrong must still reach the operator (a store that failed after the ledger
    changed, a sweep stopped part-way). A refusal (nothing changed) is a warning with its text;
    a store's failure (``StoreWriteError``, its text masked already) or the system's (``OSError``:
    a full disk) an error with its text; anything else an error with its type. The traceback shows no exception's message
    (``maskedtrace``): a vendor's, a driver's or a bug's may quote the value written or
    forgotten (a ``StoreWriteError``'s cause is the vendor's own exception). Ctrl-C or
    ``SystemExit`` in the flow is not logged: the event loop raises it to the program."""
    if not isinstance(error, Exception):
        return
    if isinstance(error, LedgerError):
        log.warning("a flow whose caller was cancelled failed: %s", error)
        return
    text = str(error) if isinstance(error, StoreWriteError | OSError) else type_name(error)
    log_traceback(
        log, logging.ERROR, error, None, "a flow whose caller was cancelled failed: %s", text
    )

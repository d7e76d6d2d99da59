"""A stop lets the calls in flight be answered before uvicorn's own grace period starts.

uvicorn stops (SIGTERM, SIGINT, ``close()``) by closing idle connections, then waiting up to
``timeout_graceful_shutdown`` (3 s here) for the others, then cancelling their requests. A tool
call that takes longer (a store's network round trips, its verification retries) was cut: on
2025-06-18 it runs in its session's task and its shielded flow (``stores/flows.py``) finished,
but the answer was lost (the caller, told nothing, retries a write that had landed); on
2026-07-28 it runs in the request's own task, and uvicorn's native cancel goes through an
anyio shield: a write stopped between a store's put and the ledger.

``DrainingServer`` first stops accepting and ends idle connections as uvicorn does, then waits
while a tool call is being served (``MemoryService.in_flight``), at most ``DRAIN_SECONDS`` or
until a second SIGINT. Then ``closing`` ends the ``subscriptions/listen`` streams (POSTs that
stay open) the graceful way, their final result sent (``Notifier.uninstall``), and each
session's standalone ``GET`` stream (``end_get_streams``), where uvicorn cut them after its 3 s
with a traceback in the log and the client told its stream was lost;
then uvicorn's own shutdown lets the answers go out. Nothing else is waited for longer than
before: a client still sending its body gets uvicorn's 3 s. A call uvicorn cancels after all
that still finishes its flow (``stores/finish.py``, at most ``FINISH_SECONDS``): the
server waits for it (``outlast``) before its event loop ends, which would cut the flow again.

``delay`` (``[server] shutdown_delay``, 0 by default): a SIGTERM first keeps the server
accepting and serving for that many seconds while ``stopping`` is true (``/readyz`` answers
``draining``), so a load balancer or Kubernetes takes it out of rotation before the listener
closes; then the stop above. Only SIGTERM, what orchestrators and service managers send: a
SIGINT (Ctrl-C) stops at once as before. Any second signal, or ``should_exit`` set by
``close()``, ends the delay and the stop goes on as without one; a further SIGINT then cuts the
drain short as uvicorn's does.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

import uvicorn

from agent_custody_state.config import MAX_SHUTDOWN_DELAY

log = logging.getLogger(__name__)

#: How long a stop waits for the calls in flight to be answered, at most.
DRAIN_SECONDS = 30.0


async def outlast(serving: Callable[[], int], limit: float) -> None:
    """Wait while ``serving()`` is above 0, at most ``limit`` seconds."""
    deadline = asyncio.get_running_loop().time() + limit
    while serving() and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)


def checked_delay(delay: float) -> float:
    """``delay`` if it is a ``shutdown_delay`` (0 to ``MAX_SHUTDOWN_DELAY`` s), else ``ValueError``."""
    if not 0 <= delay <= MAX_SHUTDOWN_DELAY:  # NaN too
        raise ValueError(f"shutdown_delay must be 0 to {MAX_SHUTDOWN_DELAY:g} s, not {delay}")
    return delay


class DrainingServer(uvicorn.Server):
    """uvicorn's server, whose shutdown first waits for ``serving()`` to reach 0, and whose
    SIGTERM first serves on for ``delay`` seconds."""

    def __init__(
        self,
        config: uvicorn.Config,
        serving: Callable[[], int],
        closing: Callable[[], None] | None = None,
        limit: float = DRAIN_SECONDS,
        delay: float = 0.0,
    ) -> None:
        super().__init__(config)
        self.serving, self.closing, self.limit = serving, closing, limit
        self.delay = checked_delay(delay)
        self.delay_ends: float | None = None  # when a delay begun by SIGTERM ends (monotonic)
        self._told = False  # whether the delay was logged

    @property
    def stopping(self) -> bool:
        """Whether a stop has begun: its delay, or the stop itself."""
        return self.should_exit or self.delay_ends is not None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit:
            super().handle_exit(sig, frame)  # a SIGINT: force_exit, as uvicorn's
        elif self.delay_ends is not None:  # a second signal ends the delay: stop as without one
            self._captured_signals.append(sig)
            self.should_exit = True
        elif sig == signal.SIGTERM and self.delay > 0:
            self._captured_signals.append(sig)  # raised again for the previous handler at the end
            self.delay_ends = time.monotonic() + self.delay
        else:
            super().handle_exit(sig, frame)

    def stop_signal(self, sig: int | None) -> None:
        """A stop asked outside uvicorn's signal handlers: ``sig``, a signal the command caught
        before those were in place (the server already announced: a SIGTERM there skipped
        ``delay``), is taken as they take it; None stops at once (``close``, a test)."""
        if sig is None or self.should_exit:
            self.should_exit = True
        else:
            self.handle_exit(sig, None)

    async def on_tick(self, counter: int) -> bool:
        if self.delay_ends is not None and not self._told:  # logged here, not in the handler
            self._told = True
            log.info(
                "stop: serving %g s more while /readyz answers draining (shutdown_delay); "
                "a second signal stops now",
                self.delay,
            )
        if self.delay_ends is not None and time.monotonic() >= self.delay_ends:
            self.should_exit = True
        return await super().on_tick(counter)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:  # stop accepting, as uvicorn's shutdown starts
            server.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()  # idle ones close; busy ones close once answered
        deadline = asyncio.get_running_loop().time() + self.limit
        while (
            self.serving() and not self.force_exit and asyncio.get_running_loop().time() < deadline
        ):
            await asyncio.sleep(0.05)
        if self.closing is not None:
            self.closing()  # end the open streams the way a client is told they ended
        await super().shutdown(sockets)


def end_get_streams(sessions: Any) -> None:
    """End the standalone ``GET`` stream of every live session of ``sessions`` (the SDK's
    session manager). Nothing else ends one: uvicorn waited its 3 s for it at every stop with an
    SDK client connected (they all open one), then cut it with an ERROR and a traceback."""
    live = getattr(sessions, "_server_instances", None)  # the SDK's table (private)
    for transport in list(live.values()) if isinstance(live, dict) else ():
        close = getattr(transport, "close_standalone_sse_stream", None)
        if close is not None:
            close()


def memory_server(
    config: uvicorn.Config, memory: Any, delay: float, app: Any = None
) -> DrainingServer:
    """The server of ``memory`` (a ``MemoryServer``): its stop waits for its tool calls in
    flight, then ends its ``subscriptions/listen`` streams and the ``GET`` streams of the
    sessions of ``app`` (``app.state.mcp_sessions``: the SDK's session manager); a SIGTERM
    first waits ``delay``."""
    serving = lambda: memory.memory.in_flight  # noqa: E731
    sessions = getattr(getattr(app, "state", None), "mcp_sessions", None)

    def closing() -> None:
        memory.notifier.uninstall()
        end_get_streams(sessions)

    return DrainingServer(config, serving, closing, DRAIN_SECONDS, delay)

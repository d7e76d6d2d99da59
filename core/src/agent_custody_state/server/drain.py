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
stay open) the graceful way, their final result sent (``Notifier.uninstall``), where uvicorn
cut them after its 3 s with a traceback in the log and the client told its stream was lost;
then uvicorn's own shutdown lets the answers go out. Nothing else is waited for longer than
before: a client still sending its body gets uvicorn's 3 s. A call uvicorn cancels after all
that still finishes its flow (``stores/finish.py``, at most ``FINISH_SECONDS``): the
server waits for it (``outlast``) before its event loop ends, which would cut the flow again.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

import uvicorn

#: How long a stop waits for the calls in flight to be answered, at most.
DRAIN_SECONDS = 30.0


async def outlast(serving: Callable[[], int], limit: float) -> None:
    """Wait while ``serving()`` is above 0, at most ``limit`` seconds."""
    deadline = asyncio.get_running_loop().time() + limit
    while serving() and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)


class DrainingServer(uvicorn.Server):
    """uvicorn's server, whose shutdown first waits for ``serving()`` to reach 0."""

    def __init__(
        self,
        config: uvicorn.Config,
        serving: Callable[[], int],
        closing: Callable[[], None] | None = None,
        limit: float = DRAIN_SECONDS,
    ) -> None:
        super().__init__(config)
        self.serving, self.closing, self.limit = serving, closing, limit

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

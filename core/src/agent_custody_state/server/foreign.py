"""Appends another process made to the ledger, announced to this server's subscribers.

Several ``serve --http`` processes (or stdio servers, one per agent) may share one ledger (a
JSONL or SQLite file, a PostgreSQL database). The ``event_appended`` hook (``notify.py``)
hears only this process's appends, so a subscriber on server A was never told of a change made
through server B, although A declares the subscribe capability. ``ForeignAppends`` closes
that gap: while the server runs it looks at the ledger's last event every ``POLL_SECONDS``
(one indexed read, after ``refresh``); when the head moved and someone is subscribed, it reads
the events after the last one it accounted for (newest first, stopping there) and queues those
this process did not append itself, which the notifier then announces as its own. A change
made elsewhere is therefore heard within about a poll interval; one made here is heard at the
end of its call, as before, and never twice (an event is claimed by whichever side sees it
first: the hook or the watcher).

With nobody subscribed only the mark moves (no events are read). Of more than ``MAX_BEHIND``
events appended elsewhere between two polls only the newest ``MAX_BEHIND`` are announced
(and the head). A stateless server offers no subscriptions and runs no watcher.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio

from agent_custody_state.ledger.model import Event

if TYPE_CHECKING:
    from agent_custody_state.server.notify import Notifier

log = logging.getLogger(__name__)

#: How often the ledger's last event is looked at (seconds).
POLL_SECONDS = 1.0
#: At most this many events appended elsewhere are read per poll.
MAX_BEHIND = 10_000
#: Event ids claimed by one side and not yet seen by the other, at most (oldest dropped).
_CLAIMS = 4096


class ForeignAppends:
    """The watcher of one notifier. ``claim_own`` runs in the hook (under the notifier's lock),
    ``catch_up`` on the ledger worker, ``watch`` on the event loop."""

    def __init__(self, notifier: Notifier) -> None:
        self.notifier = notifier
        # the newest event accounted for ("" for none); None before the first poll
        self.mark: str | None = None
        self.own: OrderedDict[str, None] = OrderedDict()  # heard by the hook, not yet polled
        self.taken: OrderedDict[str, None] = OrderedDict()  # announced as foreign

    def claim_own(self, event: Event) -> bool:
        """Whether the hook should queue ``event`` (False: the watcher announced it already)."""
        if self.mark is None:
            return True
        if event.event_id in self.taken:
            del self.taken[event.event_id]
            return False
        _remember(self.own, event.event_id)
        return True

    def catch_up(self) -> list[Event]:
        """The events appended elsewhere since the last call (on the worker thread)."""
        backend: Any = self.notifier.ledger.store
        backend.refresh()
        last = backend.last_event()
        newest = "" if last is None else last.event_id  # "": the ledger is empty
        if newest == self.mark:
            return []
        if self.mark is None or not self.notifier.listening():
            with self.notifier.lock:
                self.mark = newest
                self.own.clear()
                self.taken.clear()
            return []
        newer: list[Event] = []
        source = backend.events_newest_first()
        for event in source if source is not None else reversed(list(backend.iter_events())):
            if event.event_id == self.mark or len(newer) >= MAX_BEHIND:
                break
            newer.append(event)
        newer.reverse()
        foreign: list[Event] = []
        with self.notifier.lock:
            self.mark = newer[-1].event_id if newer else newest
            for event in newer:
                if event.event_id in self.own:
                    del self.own[event.event_id]
                    continue  # this process appended it: the hook queued it
                _remember(self.taken, event.event_id)
                foreign.append(event)
        return foreign

    async def watch(self, every: float = POLL_SECONDS) -> None:
        """Poll until cancelled; a failed poll or announcement is logged (once while they keep
        failing) and the next poll tries again."""
        failing = False  # told once, not at every poll, until a poll succeeds again
        owed = False  # a flush failed: its events are queued again, for the next one
        while True:
            try:
                foreign = await self.notifier.worker.run(self.catch_up)
                if foreign or owed:
                    with self.notifier.lock:
                        self.notifier.pending.extend(foreign)
                    # A flush that fails (its ledger read, a bus) queues its events again;
                    # it must not end the watcher, and with it the server's task group.
                    owed = True
                    await self.notifier.flush()
                    owed = False
                failing = False
            except Exception as exc:
                if not failing:
                    log.warning("could not look for changes made by other processes: %s", exc)
                failing = True
            await anyio.sleep(every)


def _remember(ids: OrderedDict[str, None], event_id: str) -> None:
    ids[event_id] = None
    while len(ids) > _CLAIMS:
        ids.popitem(last=False)


@asynccontextmanager
async def watched(
    inner: AbstractAsyncContextManager[Any], notifier: Notifier | None
) -> AsyncIterator[None]:
    """``inner`` (the HTTP app's lifespan; nothing over stdio), with ``notifier``'s watcher
    running inside it (none when ``notifier`` is None: a stateless HTTP server, which offers no
    subscriptions)."""
    async with inner:
        if notifier is None:
            yield
            return
        async with anyio.create_task_group() as group:
            group.start_soon(notifier.foreign.watch)
            try:
                yield
            finally:
                group.cancel_scope.cancel()

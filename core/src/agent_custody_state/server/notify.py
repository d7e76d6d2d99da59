"""Resource subscriptions: tell subscribed clients when a fact or a subject changed.

The server hears its own ledger's appends through the ``event_appended`` hook (a plugin object
registered on the ledger's host while the server lives; the ledger layer knows nothing of it).
The hook runs on the writer's thread, so it only queues the event; ``flush`` (called by the
server after every tool call, on the event loop) turns queued events into resource URIs and
announces each once:

- on 2026-07-28 ``subscriptions/listen`` streams, through the SDK's ``InMemorySubscriptionBus``
  and ``ListenHandler`` (which filter by each stream's honored URIs);
- on 2025-11-25 connections that sent ``resources/subscribe``, as
  ``notifications/resources/updated`` on the connection's standalone channel.

An assert names its subject (its timeline changed) and the fact it supersedes; a retract,
confirm, hold, release or forget names its fact and that fact's subject, and a retract or forget
of a superseder also the fact it superseded (believed again). A superseded fact is announced in
its own space, which may not be its superseder's. Every append names the ledger head (to
unscoped callers only). Appends another process made to the same ledger (several servers on
one ledger) are found by polling (``foreign.py``, while the server runs over HTTP or stdio)
and announced the same way, within about a second. A connection's legacy subscriptions end
with it.

A space-scoped subscriber hears only of changes to facts in its spaces (each scope has its own
listen bus, kept while a stream of that scope is open; a legacy subscription remembers its
connection's scope): a subject whose facts in another space changed is not announced to it.
"""

from __future__ import annotations

import itertools
import logging
import threading
import weakref
from typing import Any

import anyio
import mcp_types as types
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.subscriptions import ResourceUpdated

from agent_custody_state.hookspecs import hookimpl
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.model import AssertEvent, Event
from agent_custody_state.server.foreign import ForeignAppends
from agent_custody_state.server.resources import HEAD_URI, canonical_uri, fact_uri, subject_uri
from agent_custody_state.server.scopes import SpaceScope, allows
from agent_custody_state.server.worker import LedgerWorker

log = logging.getLogger(__name__)

#: How long one legacy subscriber may take to accept a call's notifications, at most.
SEND_SECONDS = 2.0

# Names of the listeners on the host: numbered, never ``id()`` (a collected server's id is
# reused, and a name already taken makes the host refuse the new listener).
_NUMBERS = itertools.count(1)


def _canonical_filter(params: Any) -> Any:
    """A listen request's resource URIs in the spelling notifications use: the SDK delivers an
    event to a stream only if its URI is one the stream asked for, character for character.
    The acknowledgement names them so, which tells the client what it will hear."""
    wanted = getattr(getattr(params, "notifications", None), "resource_subscriptions", None)
    if not wanted:
        return params
    canonical = list(dict.fromkeys(canonical_uri(uri) for uri in wanted))
    if canonical == list(wanted):
        return params
    notifications = params.notifications.model_copy(update={"resource_subscriptions": canonical})
    return params.model_copy(update={"notifications": notifications})


class _AppendListener:
    """The hook object: queues this ledger's appended events (other ledgers are ignored)."""

    def __init__(self, notifier: Notifier) -> None:
        self.notifier = weakref.ref(notifier)  # a forgotten server must not live on in the host

    @hookimpl
    def event_appended(self, ledger: Any, event: Any) -> None:
        notifier = self.notifier()
        if notifier is not None and ledger is notifier.ledger:
            with notifier.lock:
                if notifier.foreign.claim_own(event):
                    notifier.pending.append(event)


def _leave(host: Any, listener: _AppendListener) -> None:
    """Take ``listener`` off ``host`` (once; a second call finds it gone)."""
    if host.pm.is_registered(listener):
        host.pm.unregister(listener)


class Notifier:
    """Subscriptions of one server: the listen bus and the legacy per-connection URI sets."""

    def __init__(self, ledger: Ledger, worker: LedgerWorker) -> None:
        self.ledger = ledger
        self.worker = worker
        self.bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self.bus)
        # one bus and listen handler per space scope (the unscoped one above is ``None``'s)
        self.scoped: dict[SpaceScope | None, tuple[InMemorySubscriptionBus, ListenHandler]] = {
            None: (self.bus, self.listen)
        }
        self.lock = threading.Lock()
        self.pending: list[Event] = []
        # connection key -> (the latest session proxy of that connection, subscribed URIs in
        # the spelling notifications use); and each such URI's spellings the client used
        self.legacy: dict[int, tuple[Any, set[str]]] = {}
        self.spellings: dict[int, dict[str, set[str]]] = {}
        self.legacy_scope: dict[int, SpaceScope | None] = {}
        self.foreign = ForeignAppends(self)
        self._listener = _AppendListener(self)
        self._host: Any = None
        self._finalizer: weakref.finalize[Any, Any] | None = None

    def install(self) -> None:
        """Start hearing the ledger's appends (on the host the ledger announces them to).

        The listener leaves the host when this notifier does: by ``uninstall``, or when a server
        never closed is collected (else every later append would still call it).
        """
        host = getattr(self.ledger, "_host", None)
        if host is None:
            from agent_custody_state.plugins import get_plugin_manager

            host = get_plugin_manager()
        register = getattr(host, "register_plugin", None)
        if register is None:  # a custom host without plugins: no notifications
            log.warning("the ledger's host takes no listeners: resource updates are not sent")
            return
        register(self._listener, name=f"memory-server-notify-{next(_NUMBERS)}")
        if not host.pm.is_registered(self._listener):
            raise RuntimeError(
                "the ledger's host refused the server's append listener: "
                + "; ".join(host.errors[-1:])
            )
        self._host = host
        self._finalizer = weakref.finalize(self, _leave, host, self._listener)

    def uninstall(self) -> None:
        if self._host is not None:
            if self._finalizer is not None:
                self._finalizer.detach()
            _leave(self._host, self._listener)
        self._host = None
        for _bus, handler in self.scoped.values():
            handler.close()

    def listening(self) -> bool:
        """Whether anyone is subscribed: a legacy subscription or an open listen stream."""
        if self.legacy:
            return True
        return any(getattr(h, "_streams", True) for _bus, h in list(self.scoped.values()))

    def listen_for(self, spaces: SpaceScope | None) -> ListenHandler:
        """The ``subscriptions/listen`` handler of callers limited to ``spaces``."""
        if spaces not in self.scoped:
            bus = InMemorySubscriptionBus()
            self.scoped[spaces] = (bus, ListenHandler(bus))
        return self.scoped[spaces][1]

    async def serve_listen(self, ctx: Any, params: Any, spaces: SpaceScope | None) -> Any:
        """Serve one ``subscriptions/listen`` stream of a caller limited to ``spaces``; the
        scope's bus leaves with its last stream (scopes come from tokens: unbounded over time).
        A stream registers before its handler first awaits, so none is lost in between."""
        handler = self.listen_for(spaces)
        try:
            return await handler(ctx, _canonical_filter(params))
        finally:
            held = self.scoped.get(spaces)
            idle = not getattr(handler, "_streams", True)  # the SDK's set of open streams
            if spaces is not None and held is not None and held[1] is handler and idle:
                del self.scoped[spaces]

    # -- 2025-11-25: resources/subscribe ---------------------------------------------------

    @staticmethod
    def _key(session: Any) -> int:
        # The session proxy is made per request; the connection behind it is what subscribes.
        return id(getattr(session, "_connection", session))

    async def subscribe(
        self, ctx: Any, params: types.SubscribeRequestParams, spaces: SpaceScope | None = None
    ) -> types.EmptyResult:
        key = self._key(ctx.session)
        if key not in self.legacy:
            # A closed connection's sends are dropped silently (never an error), so its
            # subscriptions leave with it, when the SDK unwinds the connection's exit stack.
            stack = getattr(getattr(ctx.session, "_connection", None), "exit_stack", None)
            if stack is not None:
                stack.callback(self._drop, key)
        # Kept by the spelling notifications use, each sent in every spelling the client
        # subscribed with (a raw or lower-case escaped URI, which reads the same resource,
        # was acknowledged and never heard of anything).
        _, uris = self.legacy.get(key, (None, set()))
        uri = canonical_uri(params.uri)
        uris.add(uri)
        self.spellings.setdefault(key, {}).setdefault(uri, set()).add(params.uri)
        self.legacy[key] = (ctx.session, uris)
        self.legacy_scope[key] = spaces
        return types.EmptyResult()

    def _drop(self, key: int) -> None:
        self.legacy.pop(key, None)
        self.legacy_scope.pop(key, None)
        self.spellings.pop(key, None)

    async def unsubscribe(
        self, ctx: Any, params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        key = self._key(ctx.session)
        if key in self.legacy:
            uri = canonical_uri(params.uri)
            spellings = self.spellings.get(key, {}).get(uri, set())
            spellings.discard(params.uri)
            if not spellings:
                self.legacy[key][1].discard(uri)
                self.spellings.get(key, {}).pop(uri, None)
        return types.EmptyResult()

    # -- delivery ----------------------------------------------------------------------------

    def _uris(self, events: list[Event]) -> dict[str, set[str]]:
        """The resources ``events`` changed, each with the spaces of the facts that changed it
        (on the worker thread: it may read the ledger).

        A fact superseded, or believed again when its superseder is retracted or forgotten,
        changed too, in its own space (which may not be its superseder's)."""
        uris: dict[str, set[str]] = {}

        def touched(fact_id: str | None) -> None:
            fact = self.ledger.get(fact_id) if fact_id is not None else None
            if fact is not None:
                uris.setdefault(fact_uri(fact.fact_id), set()).add(fact.space)
                uris.setdefault(subject_uri(fact.subject), set()).add(fact.space)

        for event in events:
            if isinstance(event, AssertEvent):
                uris.setdefault(subject_uri(event.fact.subject), set()).add(event.fact.space)
                touched(event.supersedes)
                continue
            fact_id = getattr(event, "fact_id", None)
            if fact_id is None:
                continue
            touched(fact_id)
            if event.kind in ("retract", "forget"):
                history = self.ledger.history(fact_id)
                own = next((e for e in history if isinstance(e, AssertEvent)), None)
                if own is not None and own.fact_id == fact_id:
                    touched(own.supersedes)
        if events:
            uris[HEAD_URI] = set()  # every append moves the head (unscoped callers only)
        return uris

    @staticmethod
    def _hears(scope: SpaceScope | None, uri: str, spaces: set[str]) -> bool:
        """Whether a caller limited to ``scope`` is told of a change to ``uri`` in ``spaces``."""
        if uri == HEAD_URI:
            return scope is None  # the head describes every space
        return any(allows(scope, space) for space in spaces)

    async def flush(self) -> None:
        """Announce every resource the queued appends changed."""
        with self.lock:
            events, self.pending = self.pending, []
        if not events:
            return
        try:
            uris = await self.worker.run(self._uris, events)
        except BaseException:
            with self.lock:  # cancelled: the next flush announces them
                self.pending[:0] = events
            raise
        owed: dict[int, list[str]] = {}
        for uri, spaces in uris.items():
            for scope, (bus, _handler) in list(self.scoped.items()):
                if self._hears(scope, uri, spaces):
                    await bus.publish(ResourceUpdated(uri=uri))
            for key, (_session, subscribed) in list(self.legacy.items()):
                if uri in subscribed and self._hears(self.legacy_scope.get(key), uri, spaces):
                    spelt = self.spellings.get(key, {}).get(uri) or {uri}
                    owed.setdefault(key, []).extend(sorted(spelt))
        if owed:  # side by side: one slow subscriber must not delay the others
            async with anyio.create_task_group() as group:
                for key, told in owed.items():
                    group.start_soon(self._tell, key, told)

    async def _tell(self, key: int, uris: list[str]) -> None:
        """Send one legacy subscriber its updates. One that cannot take them within
        ``SEND_SECONDS`` (it stopped reading its stream, and the SDK's buffers are full) is
        dropped as a gone one is: it must not hold up the tool call whose changes these are."""
        held = self.legacy.get(key)
        if held is None:
            return
        with anyio.move_on_after(SEND_SECONDS) as waited:
            try:
                for uri in uris:
                    await held[0].send_resource_updated(uri)
            except Exception as exc:  # a gone client must not fail the caller's tool call
                log.debug("dropping a subscriber that cannot be reached: %s", exc)
                self._drop(key)
        if waited.cancelled_caught:
            log.warning("dropping a resource subscriber that stopped reading its stream")
            self._drop(key)

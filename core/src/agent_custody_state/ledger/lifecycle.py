"""A ledger's life: open until ``close()``, and the writes running in it meanwhile.

``Ledger.close()`` may be called from another thread while a write is half-way (a server
stopping, a worker pool shutting down). Closing the backend under that write made a committed
event read as a failure (the section's end found the backend closed after the append was
durable), and a backend with nothing to release (``memory:``) went on taking writes after
``close()``. So a ledger refuses every call once closed (``LedgerError`` code ``"closed"``) and
``close()`` first waits for the writes other threads are in (``writes``), so each of them
ends, committed or rolled back, compacted and announced, before the backend is released.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

from agent_custody_state.ledger import forks
from agent_custody_state.ledger.errors import LedgerError

F = TypeVar("F", bound=Callable[..., Any])


def writes(method: F) -> F:
    """A ledger method that writes, run as one of its ledger's writes (``Lifecycle.enter``)."""

    @functools.wraps(method)
    def guarded(self: Any, /, *args: Any, **kwargs: Any) -> Any:
        life: Lifecycle = self._life
        life.enter()
        try:
            return method(self, *args, **kwargs)
        finally:
            life.leave()

    return cast(F, guarded)


class Lifecycle:
    """Open or closed, and how many writes each thread is in (``enter``/``leave``)."""

    __slots__ = ("__weakref__", "_cond", "_writing", "closed", "location")

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._writing: dict[int, int] = {}  # thread id -> depth of its writes
        self.closed = False
        self.location = ""  # set at close: the closed backend's, for the messages
        forks.watch(self)

    def _after_fork(self) -> None:
        """In a child just forked (``forks``): the writes of the parent's other threads are not
        this process's (``close`` waited for them for ever), nor is a lock one of them held."""
        me = threading.get_ident()  # the forking thread goes on here
        self._writing = {me: self._writing[me]} if me in self._writing else {}
        self._cond = threading.Condition(threading.Lock())

    def refusal(self) -> LedgerError:
        return LedgerError(
            f"ledger {self.location} is closed; open it again to use it", code="closed"
        )

    def check(self) -> None:
        if self.closed:
            raise self.refusal()

    def enter(self) -> None:
        """A write starts (from its checks to its announcement): refused once closed, and
        ``close`` waits for it to end. Re-entrant."""
        me = threading.get_ident()
        with self._cond:
            if self.closed:
                raise self.refusal()
            self._writing[me] = self._writing.get(me, 0) + 1

    def leave(self) -> None:
        me = threading.get_ident()
        with self._cond:
            depth = self._writing[me] - 1
            if depth:
                self._writing[me] = depth
            else:
                del self._writing[me]
                if self.closed:
                    self._cond.notify_all()

    def close(self, location: str) -> bool:
        """Mark the ledger closed and wait until no other thread is in a write (this thread's
        own, if it closes from inside one, cannot end first). True the first time."""
        me = threading.get_ident()
        with self._cond:
            if self.closed:
                return False
            self.closed, self.location = True, location
            self._cond.wait_for(lambda: not self._writing.keys() - {me})
            return True


class ClosedBackend:
    """What a closed ledger holds in place of its backend: every call on it is refused (a
    ``memory:`` ledger, with nothing to release, went on taking writes after ``close()``). Its
    plain attributes (``kind``, ``location``, ``read_only``) still read, as they did."""

    __slots__ = ("_closed", "_life")

    def __init__(self, life: Lifecycle, closed: object) -> None:
        self._life, self._closed = life, closed

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._closed, name)
        if callable(value):
            raise self._life.refusal()
        return value


def open_args(
    location: object, forget_key: object, host: object, key_store: object, chain: object
) -> None:
    """``Ledger``'s arguments of the wrong type, refused (naming the parameter) before anything
    is opened, so nothing is created; a wrong ``forget_key`` used to fail only at the first
    forget, deep inside the digest."""
    from agent_custody_state.ledger.arguments import text_arg
    from agent_custody_state.ledger.backend import EventBackend
    from agent_custody_state.ledger.keystore import KeyStore

    if not isinstance(location, EventBackend):
        where = os.fspath(location) if isinstance(location, str | os.PathLike) else None
        if not isinstance(where, str) or not where:
            raise LedgerError(
                "location must be a path, a URL or an EventBackend, not "
                + (repr(where) if isinstance(where, str) else f"a {type(location).__name__}"),
                field="location",
            )
    if forget_key is not None:
        text_arg(forget_key, "forget_key", empty_ok=True)
    if host is not None and not callable(getattr(host, "open_backend", None)):
        raise LedgerError("host must be a LedgerHost (with open_backend)", field="host")
    if key_store is not None and not isinstance(key_store, str | KeyStore):
        raise LedgerError(
            f"key_store must be a location or a KeyStore, not a {type(key_store).__name__}",
            field="key_store",
        )
    if not isinstance(chain, bool):
        raise LedgerError("chain must be True or False", field="chain")

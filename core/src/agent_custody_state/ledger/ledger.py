"""The Ledger: the public face of the bitemporal model (SPEC sections 2 and 7).

Every mutation runs inside one ``EventBackend.transaction()``: the rules (``rules.py``) are
checked against what the backend holds at that moment (including other processes' writes) and
the event is appended before the section ends, so two racing supersessions cannot both pass rule
2.1.2. The end of a section (stamp, seal, append) runs in the backend's ordered phase
(``EventBackend.ordered``), after the checks, so a backend locking keys serialises only that. Reads live in ``reading.py``; this class adds them through ``LedgerReads``.
Retract, confirm, hold and release are ``actions.py``'s (``LedgerActions``); forget and sweep
``forgetting.py``'s, their certificates ``certifying.py``'s.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from datetime import datetime
from os import PathLike
from typing import Any, TypeVar, cast

from agent_custody_state.ledger.actions import LedgerActions, Precondition
from agent_custody_state.ledger.arguments import (
    build_assert,
    restamp,
)
from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state.ledger.bulk import LedgerBulk
from agent_custody_state.ledger.chain import ChainHead
from agent_custody_state.ledger.checkpoints import Checkpoint, chain_writer
from agent_custody_state.ledger.clockargs import clock_arg, clock_time
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.files import NewFiles
from agent_custody_state.ledger.forgetting import LedgerForgetting
from agent_custody_state.ledger.highwater import HighWater
from agent_custody_state.ledger.host import LedgerHost, default_host
from agent_custody_state.ledger.keystore import KeyStore
from agent_custody_state.ledger.lifecycle import ClosedBackend, Lifecycle, open_args, writes
from agent_custody_state.ledger.locking import assert_keys, in_order, section
from agent_custody_state.ledger.model import (
    AssertEvent,
    Event,
    handed,
)
from agent_custody_state.ledger.modemark import check_plain_values, forget_mode_arg
from agent_custody_state.ledger.owned import Unshared
from agent_custody_state.ledger.reading import LedgerReads
from agent_custody_state.ledger.readonly import check_writable, missing_ledger, read_only_shredding
from agent_custody_state.ledger.requests import AssertRequest, requested
from agent_custody_state.ledger.rules import (
    check_assert,
    check_replacement,
    deferred_time,
)
from agent_custody_state.ledger.shred import shredding
from agent_custody_state.maskedtrace import log_traceback
from agent_custody_state.timeutil import utc_now

log = logging.getLogger(__name__)

E = TypeVar("E", bound=Event)


class Ledger(LedgerActions, LedgerForgetting, LedgerBulk, LedgerReads, Unshared):
    """A bitemporal, append-only ledger of facts over an ``EventBackend``.

    ``Ledger("ledger.jsonl")``, ``Ledger("ledger.sqlite")``, ``Ledger("postgresql://...")`` or
    ``Ledger(backend)``. ``forget_key`` keys forget digests (HMAC-SHA256); ``clock`` returns an
    aware datetime (tests pin it); ``host`` opens locations and hears of appended events (default:
    the process's plugin manager); other keyword arguments go to the backend.

    ``forget_mode="crypto-shred"`` encrypts every value with a key of its own, kept in a key store
    apart from the events (``key_store``: a location, a ``KeyStore``, or None for the backend's
    default), and forget destroys the key (see ``shred`` and docs/forget.md).
    Events are sealed into the hash chain (``docs/proofs.md``) unless ``chain`` is False;
    ``checkpoint_key``, ``checkpoint_every``, ``checkpoints``: ``checkpoints.chain_writer``.
    ``read_only=True`` opens an existing ledger without changing anything where it is kept (no
    file, table or sidecar created, no torn line cut, no mode recorded) and refuses every write
    with ``LedgerError`` code ``"read_only"`` (``readonly``; docs/backends.md).
    """

    def __init__(
        self,
        location: str | PathLike[str] | EventBackend,
        forget_key: str | None = None,
        clock: Callable[[], datetime] | None = None,
        *,
        host: LedgerHost | None = None,
        forget_mode: str = "plain",
        key_store: str | KeyStore | None = None,
        chain: bool = True,
        checkpoint_every: int | None = None,
        checkpoint_key: Any = None,
        checkpoints: Any = None,
        read_only: bool = False,
        **backend_options: Any,
    ) -> None:
        self._life = Lifecycle()
        self.forget_mode = forget_mode_arg(forget_mode)
        self._clock = clock_arg(clock) or utc_now  # refused before anything is opened
        self._present = HighWater()  # the latest transaction time this object appended
        open_args(location, forget_key, host, key_store, chain)
        if key_store is not None and self.forget_mode != "crypto-shred":
            raise LedgerError('key_store needs forget_mode="crypto-shred"', field="key_store")
        if not isinstance(read_only, bool):
            raise LedgerError("read_only must be True or False", field="read_only")
        if read_only and (checkpoint_key is not None or checkpoint_every is not None):
            raise LedgerError(
                "checkpoint_key signs checkpoints, which a read-only ledger never writes",
                field="checkpoint_key",
            )
        self._host = host
        created: NewFiles | None = None
        opened = not isinstance(location, EventBackend)
        if isinstance(location, EventBackend):
            self.backend = location
        else:
            where = os.fspath(location)
            if read_only:  # passed only when asked: a backend may not know the option
                missing_ledger(where)
                backend_options = {**backend_options, "read_only": True}
            else:
                created = NewFiles(where)
            opening, options = (host or default_host()).open_backend, backend_options
            self.backend = NewFiles.undoing(created, opening, where, **options)
        #: Whether every write is refused (asked, or the backend was opened read-only).
        self.read_only = read_only or self.backend.read_only
        self.forget_key = forget_key or None
        try:
            if self.forget_mode == "crypto-shred":
                # Both close the backend if refused.
                if self.read_only:
                    self.backend = read_only_shredding(self.backend, key_store)
                else:
                    self.backend = shredding(self.backend, key_store)
            self._chain = chain_writer(
                self.backend, chain, key=checkpoint_key, every=checkpoint_every, where=checkpoints
            )
        except Exception:
            if opened:  # opened here: release it, and what its open created
                with suppress(Exception):
                    self.backend.close()
                if created is not None:
                    created.remove()
            raise

    # -- plumbing ------------------------------------------------------------------------------

    @property
    def store(self) -> EventBackend:
        """The event backend (the name SPEC section 7 and the TypeScript original use)."""
        return self.backend

    def now(self) -> str:
        return clock_time(self._clock())

    def present(self) -> str:
        """A read's "now": the clock's time, or the latest time this object appended if later
        (a clock stepped back: ``locking.in_order``). From memory: no backend call."""
        return max(self.now(), self._present.time)

    def _appended(self, events: Sequence[Event]) -> None:
        self._chain.sealed(events)
        self._present.raise_to(events)  # a maximum under a lock: threads announce in any order
        try:
            host = self._host or default_host()
        except RuntimeError:
            return  # a ledger over a backend object, in a process without the plugin manager
        listens = getattr(host, "listens", None)  # optional: a host may not say (LedgerHost)
        if listens is not None and not listens():
            return
        for event in events:
            try:
                host.event_appended(self, event)
            except Exception as exc:  # a notification must never undo a durable write
                # Its message may quote the event: the type only (the stores' masking is above)
                text = "event_appended hook failed for event %s"
                log_traceback(log, logging.ERROR, exc, None, text, event.event_id)

    @property
    def location(self) -> str:
        return self._life.location or self.backend.location

    def chain_head(self) -> ChainHead:
        """Where the chain stands now: events covered and the head hash after them."""
        self.backend.refresh()
        return self.backend.chain_head()

    @writes
    def checkpoint(self) -> Checkpoint:
        """Sign and keep a checkpoint of the chain now (needs ``checkpoint_key``)."""
        check_writable(self, "checkpoint")
        if self._chain.checkpointer is None:
            raise LedgerError("no checkpoint key: open the ledger with checkpoint_key=")
        checkpoint: Checkpoint = self._chain.checkpointer.checkpoint(self.chain_head())
        return checkpoint

    def __enter__(self) -> Ledger:
        self._life.check()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the backend once other threads' write sections end (``lifecycle``)."""
        if self._life.closed:
            return  # a second close does nothing
        backend = self.backend
        if self._life.close(backend.location):
            # Every later use of the backend is refused, reads included (``ClosedBackend``).
            self.backend = cast(EventBackend, ClosedBackend(self._life, backend))
            backend.close()

    # -- assert --------------------------------------------------------------------------------

    def validate_assert(
        self, request: AssertRequest | None = None, /, **kwargs: Any
    ) -> AssertEvent:
        """Run every check of ``assert_fact`` without writing; raises ``LedgerError``. Returns
        the event the assert would write now (its ids and times are not kept)."""
        self.backend.refresh()
        request = requested("validate_assert", request, kwargs)
        check_plain_values(self.forget_mode, self.backend)  # as assert_fact: SPEC 2.1
        event = build_assert(self.now, request)
        if deferred_time(self.backend, request):  # stamped now as the append would stamp it
            event = restamp(event, in_order(self.backend, event.tx_time), request)
        check_assert(self.backend, event, fresh=request.fact_id is None)
        return event

    @writes
    def assert_fact(
        self,
        request: AssertRequest | None = None,
        /,
        *,
        precondition: Precondition | None = None,
        **kwargs: Any,
    ) -> AssertEvent:
        """Assert a fact (SPEC 2.1): keyword arguments as SPEC section 7, or an
        ``AssertRequest``; returns the event. ``precondition``: checked on the superseded fact
        (if any) under the write lock, after the rules."""
        check_writable(self, "assert_fact")
        request = requested("assert_fact", request, kwargs, "precondition")
        check_plain_values(self.forget_mode, self.backend)
        with section(self.backend, assert_keys(request)):
            # Validated under the key locks alone (other topics' writers validate alongside),
            # with a provisional stamp; the final one is taken in the ordered phase.
            event = build_assert(self.now, request)
            # The superseded fact's state (a fact id the ledger drew is not looked up). A
            # validFrom that defaults to a stamp which may still be raised is compared at the
            # final stamp only (``rules.deferred_time``).
            defer = deferred_time(self.backend, request)
            old = check_assert(self.backend, event, fresh=request.fact_id is None, defer=defer)
            if precondition is not None and old is not None:
                precondition(old)

            def stamp(tx: str) -> list[AssertEvent]:
                final = restamp(event, tx, request)
                if old is not None and (defer or final is not event):  # rules reading the stamp
                    check_replacement(final, old.assert_event)
                return [final]

            [event] = self._append_ordered(stamp, event.tx_time)
        self._appended([event])
        return handed(event, self.backend.keeps_objects)  # the kept event stays the ledger's own

    @writes
    def assert_many(self, items: Iterable[AssertRequest | Mapping[str, Any]]) -> list[AssertEvent]:
        """``LedgerBulk.assert_many``; the events returned are the caller's (``model.handed``)."""
        keeps = self.backend.keeps_objects
        return [handed(event, keeps) for event in super().assert_many(items)]

    def _append_ordered(
        self, stamp: Callable[[str], Sequence[E]], provisional: str | None = None
    ) -> list[E]:
        """The end of a write section, once its reads and checks are done: enter the backend's
        ordered phase, stamp the transaction time (``stamp(tx)`` returns the events at ``tx``,
        or refuses them), seal and append. The time is taken in the phase, so append order and
        transaction time agree across processes: an event stamped before another committed
        first would change what a read "as of" that instant returns. ``provisional``: the
        stamp the checks ran at (the clock is read once per write). It is raised to the last
        event's time when that is later (another writer took the order lock first with a later
        clock, or this clock stepped back): transaction time never goes backwards along the
        append order, whichever host's clock stamped it (``in_order``)."""
        self.backend.ordered()
        tx = in_order(self.backend, self.now() if provisional is None else provisional)
        events = self._chain.seal(self.backend, stamp(tx))
        self.backend.append(events)
        return events


__all__ = ["Ledger", "Precondition"]

"""Bulk writes: ``assert_many`` (many asserts, one transaction) and ``import_events`` (an export
appended unchanged), a mixin of ``Ledger`` kept apart because ingest speed is tuned here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from agent_custody_state.ledger.arguments import bool_arg, build_assert, new_ids, restamp
from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state.ledger.chain import ChainWriter
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.importcheck import check_export
from agent_custody_state.ledger.lifecycle import writes
from agent_custody_state.ledger.locking import batch_keys, in_order, section
from agent_custody_state.ledger.model import AssertEvent, Event
from agent_custody_state.ledger.modemark import check_plain_values
from agent_custody_state.ledger.owned import import_args
from agent_custody_state.ledger.readonly import check_writable
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.ledger.rules import Batch, check_assert, check_replacement, deferred_time

E = TypeVar("E", bound=Event)


class LedgerBulk:
    """``assert_many`` and ``import_events``; ``Ledger`` provides the rest."""

    backend: EventBackend
    forget_mode: str
    _chain: ChainWriter

    def now(self) -> str:
        raise NotImplementedError

    @property
    def location(self) -> str:
        raise NotImplementedError

    def _appended(self, events: Sequence[Event]) -> None:
        raise NotImplementedError

    def _append_ordered(
        self, stamp: Callable[[str], Sequence[E]], provisional: str | None = None
    ) -> list[E]:
        raise NotImplementedError

    def assert_many(self, items: Iterable[AssertRequest | Mapping[str, Any]]) -> list[AssertEvent]:
        """Assert many facts in one transaction (bulk ingest): all are appended, or none.

        Each item is an ``AssertRequest`` (or a mapping of ``assert_fact``'s keyword arguments);
        an item may supersede a fact asserted earlier in the same batch. The events share one
        transaction time, as they share one transaction (docs/decisions.md).
        """
        check_writable(self, "assert_many")
        items = _listed(items)
        check_plain_values(self.forget_mode, self.backend)
        with section(self.backend, batch_keys(items) if self.backend.locks_keys else None):
            # Build every event first, so the backend is asked once which of their fact ids it
            # already holds (not once per item); the first build error is raised at its place
            # in the item order, after the checks of the items before it. The events are built
            # and checked at a provisional stamp, restamped in the ordered phase.
            built: list[AssertEvent] = []
            requests: list[AssertRequest] = []
            build_error: BaseException | None = None
            stamp: list[str] = []

            def now() -> str:  # the clock is read once, when the first item is stamped
                if not stamp:
                    stamp.append(self.now())
                return stamp[0]

            ids = new_ids(2 * len(items))
            try:
                for item in items:
                    requests.append(AssertRequest.of(item))
                    built.append(build_assert(now, requests[-1], ids))
            except LedgerError as exc:
                build_error = _item_error(len(built), exc)
            except Exception as exc:
                build_error = exc
            # Only the fact ids the items gave are looked up: one the ledger drew is new.
            given = [
                e.fact_id
                for e, r in zip(built, requests[: len(built)], strict=True)
                if r.fact_id is not None
            ]
            known = {
                e.fact_id
                for e in (self.backend.events_for(given) if given else ())
                if isinstance(e, AssertEvent)
            }
            batch = Batch()
            olds: list[AssertEvent | None] = []
            # validFrom compared at the final stamp only where it may still move (``rules``).
            defer = [deferred_time(self.backend, r) for r in requests[: len(built)]]

            def first(error: LedgerError) -> LedgerError:
                """``error``, unless an item before it is refused at the stamp the batch gets
                now (its start was left to the final stamp): the first refusal in item order,
                as without a deferred check (a later writer can only raise the stamp)."""
                tx = in_order(self.backend, stamp[0]) if stamp else ""
                return _start_error(built[: len(olds)], requests, olds, defer, tx) or error

            for i, event in enumerate(built):
                try:
                    old = check_assert(self.backend, event, batch, known, defer=defer[i])
                    olds.append(None if old is None else old.assert_event)
                except LedgerError as exc:
                    raise first(_item_error(i, exc)) from None
                batch.add(event)
            if build_error is not None:
                raise first(build_error) if isinstance(build_error, LedgerError) else build_error

            def stamped(tx: str) -> list[AssertEvent]:
                moved = not stamp or tx != stamp[0]
                if not moved and not any(d and o for d, o in zip(defer, olds, strict=True)):
                    return built  # checked at this stamp already
                final = [restamp(e, tx, r) for e, r in zip(built, requests, strict=True)]
                now_of = {e.fact_id: e for e in final}  # a superseded fact of this batch moved too
                for i, (event, old) in enumerate(zip(final, olds, strict=True)):
                    if old is not None:
                        try:
                            check_replacement(event, now_of.get(old.fact_id, old))
                        except LedgerError as exc:
                            raise _item_error(i, exc) from None
                return final

            built = self._append_ordered(stamped, stamp[0] if stamp else None)
        self._appended(built)
        return built

    @writes
    def import_events(
        self, events: Iterable[Event], *, batch_size: int = 5000, check_chain: bool = True
    ) -> int:
        """Append exported events unchanged (``agent-custody-memory import``); needs an empty
        ledger. Every event is checked first (``importcheck``): a bad one is refused before
        anything is written. The events are appended in one write section (one transaction):
        a process killed inside leaves none of them, and no other writer's event comes between
        two of them (docs/decisions.md, "Imports land whole"). ``check_chain=False`` leaves out
        the chain check (``verify``'s pass over the export, about 9 us an event) for an export
        its caller has just checked (the ``import`` command does, before opening the ledger)."""
        check_writable(self, "import_events")
        bool_arg(check_chain, "check_chain")  # 0 or "" would leave the chain unchecked
        events = import_args(events, batch_size)
        check_export(events, chain=check_chain)
        check_plain_values(self.forget_mode, self.backend)
        self._check_empty()
        total = 0
        with self.backend.bulk_load():  # indexes built once at the end, where a backend can
            with section(self.backend, None):
                self._check_empty()  # again under the write lock: another writer may have won
                for start in range(0, len(events), batch_size):
                    batch = events[start : start + batch_size]
                    self.backend.append(batch)
                    total += len(batch)
        return total

    def _check_empty(self) -> None:
        count = self.backend.count()
        if count:
            raise LedgerError(
                f"import needs an empty ledger; {self.location} already has {count} events",
                code="not_empty",
            )


def _listed(items: Iterable[Any]) -> list[Any]:
    """A batch's items as a list; anything but an iterable of facts is a refusal. An error
    raised while iterating (the caller's generator failing half-way) is the caller's own and
    propagates as it is (a ``TypeError`` in it was reported as "not a list of facts"); nothing
    is written either way."""
    if isinstance(items, str | bytes | Mapping):
        raise LedgerError(f"items must be a list of facts, not {type(items).__name__}")
    try:
        iterator = iter(items)
    except TypeError:
        raise LedgerError(f"items must be a list of facts, not {type(items).__name__}") from None
    return list(iterator)


def _start_error(
    built: Sequence[AssertEvent],
    requests: Sequence[AssertRequest],
    olds: Sequence[AssertEvent | None],
    defer: Sequence[bool],
    tx: str,
) -> LedgerError | None:
    """The first refusal among the deferred replacements of ``built`` restamped at ``tx``."""
    if not tx or not any(d and o for d, o in zip(defer, olds, strict=False)):
        return None
    final = [restamp(e, tx, r) for e, r in zip(built, requests, strict=False)]
    now_of = {e.fact_id: e for e in final}
    for i, (event, old) in enumerate(zip(final, olds, strict=False)):
        if defer[i] and old is not None:
            try:
                check_replacement(event, now_of.get(old.fact_id, old))
            except LedgerError as exc:
                return _item_error(i, exc)
    return None


def _item_error(index: int, exc: LedgerError) -> LedgerError:
    """``exc`` as the refusal of item ``index`` of a batch."""
    return LedgerError(f"item {index}: {exc}", field=exc.field, code=exc.code)

"""Bulk writes: ``assert_many`` (many asserts, one transaction) and ``import_events`` (an export
appended unchanged), a mixin of ``Ledger`` kept apart because ingest speed is tuned here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agent_custody_state.ledger.arguments import build_assert, new_ids
from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state.ledger.chain import ChainWriter
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.locking import batch_keys, section
from agent_custody_state.ledger.model import AssertEvent, Event
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.ledger.rules import Batch, check_assert


class LedgerBulk:
    """``assert_many`` and ``import_events``; ``Ledger`` provides the rest."""

    backend: EventBackend
    _chain: ChainWriter

    def now(self) -> str:
        raise NotImplementedError

    @property
    def location(self) -> str:
        raise NotImplementedError

    def _appended(self, events: Sequence[Event]) -> None:
        raise NotImplementedError

    def assert_many(self, items: Iterable[AssertRequest | Mapping[str, Any]]) -> list[AssertEvent]:
        """Assert many facts in one transaction (bulk ingest): all are appended, or none.

        Each item is an ``AssertRequest`` (or a mapping of ``assert_fact``'s keyword arguments);
        an item may supersede a fact asserted earlier in the same batch. The events share one
        transaction time, as they share one transaction (docs/decisions.md).
        """
        items = list(items)
        with section(self.backend, batch_keys(items) if self.backend.locks_keys else None):
            # Build every event first, so the backend is asked once which of their fact ids it
            # already holds (not once per item); the first build error is raised at its place
            # in the item order, after the checks of the items before it.
            built: list[AssertEvent] = []
            build_error: BaseException | None = None
            stamp: list[str] = []

            def now() -> str:  # the clock is read once, when the first item is stamped
                if not stamp:
                    stamp.append(self.now())
                return stamp[0]

            ids = new_ids(2 * len(items))
            try:
                for item in items:
                    built.append(build_assert(now, AssertRequest.of(item), ids))
            except LedgerError as exc:
                build_error = LedgerError(
                    f"item {len(built)}: {exc}", field=exc.field, code=exc.code
                )
            except Exception as exc:
                build_error = exc
            known = {
                e.fact_id
                for e in self.backend.events_for([e.fact_id for e in built])
                if isinstance(e, AssertEvent)
            }
            batch = Batch()
            for i, event in enumerate(built):
                try:
                    check_assert(self.backend, event, batch, known)
                except LedgerError as exc:
                    raise LedgerError(f"item {i}: {exc}", field=exc.field, code=exc.code) from None
                batch.add(event)
            if build_error is not None:
                raise build_error
            built = self._chain.seal(self.backend, built)
            self.backend.append(built)
        self._appended(built)
        return built

    def import_events(self, events: Iterable[Event], *, batch_size: int = 5000) -> int:
        """Append exported events unchanged (``agent-custody-memory import``); needs an empty
        ledger."""
        count = self.backend.count()
        if count:
            raise LedgerError(
                f"import needs an empty ledger; {self.location} already has {count} events",
                code="not_empty",
            )
        total = 0
        batch: list[Event] = []
        for event in events:
            batch.append(event)
            if len(batch) >= batch_size:
                total += self._append_unchanged(batch)
                batch = []
        return total + (self._append_unchanged(batch) if batch else 0)

    def _append_unchanged(self, batch: list[Event]) -> int:
        with section(self.backend, None):
            self.backend.append(batch)
        return len(batch)

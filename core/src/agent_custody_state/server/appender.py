"""Group commit: asserts that arrive while one is being made durable are appended together.

A durable append costs an fsync (JSONL) or a commit (SQLite, Postgres), and the ledger thread
makes one at a time. Under concurrent writes the server therefore hands the ledger the waiting
asserts as one ``assert_many`` batch: one transaction, one fsync, every rule still checked in
order (an assert may even supersede one earlier in the batch). If the batch is refused, every
item is retried on its own, so each caller gets exactly the answer a lone write would get and
one bad write never fails another. A lone write is a batch of one.

A batch is not free everywhere: each backend declares the smallest batch worth one transaction
(``EventBackend.min_batch``; JSONL journals a multi-event commit, so it says 4); fewer waiting
writes are appended one by one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio

from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.model import AssertEvent
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.server.worker import LedgerWorker

MAX_BATCH = 64


@dataclass
class _Pending:
    request: AssertRequest
    done: anyio.Event = field(default_factory=anyio.Event)
    event: AssertEvent | None = None
    error: BaseException | None = None


class Appender:
    """Queues asserts and appends them in batches on the ledger worker."""

    def __init__(self, ledger: Ledger, worker: LedgerWorker) -> None:
        self.ledger, self.worker = ledger, worker
        self.min_batch = ledger.backend.min_batch
        self._queue: list[_Pending] = []
        self._lock = anyio.Lock()

    async def assert_fact(self, request: AssertRequest) -> AssertEvent:
        item = _Pending(request)
        self._queue.append(item)
        # Whoever holds the lock commits everything queued so far, this item included (or a
        # later holder does); waiting on the lock is what lets a batch form.
        async with self._lock:
            while not item.done.is_set():
                batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
                await self._commit(batch)
        if item.error is not None:
            raise item.error
        if item.event is None:
            raise RuntimeError("the append was interrupted")
        return item.event

    async def _commit(self, batch: list[_Pending]) -> None:
        try:
            if len(batch) < self.min_batch:
                await self._one_by_one(batch)
            else:
                events = await self.worker.run(self.ledger.assert_many, [p.request for p in batch])
                for pending, event in zip(batch, events, strict=True):
                    pending.event = event
        except LedgerError:
            await self._one_by_one(batch)
        except Exception as exc:  # a backend failure fails what was not appended
            for pending in batch:
                if pending.event is None and pending.error is None:
                    pending.error = exc
        finally:
            for pending in batch:
                pending.done.set()

    async def _one_by_one(self, batch: list[_Pending]) -> None:
        for pending in batch:
            try:
                pending.event = await self.worker.run(self.ledger.assert_fact, pending.request)
            except Exception as exc:
                pending.error = exc
            pending.done.set()  # answer each caller as soon as its own write is durable

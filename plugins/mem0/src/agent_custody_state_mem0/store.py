"""The mem0 write-through store: one verbatim memory per fact, removal checked two ways.

``put`` adds the fact text as one user message with ``infer=False`` (no LLM rewriting, so the
memory *is* the fact) and the custody metadata, for the configured user. The platform may
answer ``PENDING`` instead of ids; the add event is then polled within ``event_wait_seconds``.

mem0 de-duplicates direct imports by a hash of the text within a scope, so two facts with
equal text would come back with one memory id, and retracting either would delete both. After
each add the memory is read back: when it carries another fact's ``factId`` (or none: a memory
custody did not write), the fact is added again with ``(fact <factId>)`` appended, which gives
it a different hash and a memory of its own. ``unique_text`` appends the marker always.

``held_ids`` (the copies a failed put may have left) is the metadata-filtered listing by
``factId``: never a memory of another fact, even one mem0 merged this fact into. An add still
pending on the platform is not listed until it completes, so every add event is recorded
(``PendingAdds``: in the ``pending_file`` sidecar, durably, before the put waits) and dropped
once it settles: while one of a fact's is still pending, in this process or recorded by an
earlier one, ``held_ids`` raises (it cannot promise there is no copy; the core records the
cleanup as owed and retries it) and ``verify_removed`` answers not removed.

``verify_removed`` is true only when the memory id reads as not found, its text is kept nowhere
beside it (the local ``Memory``'s history table, ``LocalBackend.residue``), no memory of the scope
carries the fact's ``factId`` (a metadata-filtered listing), and a threshold-free search for the
fact text returns neither the id nor the ``factId``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from agent_custody_state.plugin import (
    Fact,
    LockWaitTimeout,
    StoreError,
    call_sdk,
    custody_metadata,
    fact_text,
    poll,
    run_sync,
    secret_from_env,
    withholding,
)

from .backend import EventState, Mem0Backend, Record
from .pending import PendingAdds, PendingFileError
from .sdk import guard_mem0_loggers, mem0_folder
from .settings import Mem0Settings

log = logging.getLogger(__name__)

T = TypeVar("T")


def marked_text(fact: Fact) -> str:
    """The fact text with its id appended: unique per fact, so mem0 cannot merge it."""
    return f"{fact_text(fact)} (fact {fact.fact_id})"


def _owner(record: Record) -> str | None:
    metadata = record.get("metadata")
    owner = metadata.get("factId") if isinstance(metadata, dict) else None
    return str(owner) if owner is not None else None


class Mem0Store:
    """A ``Store`` over a ``Mem0Backend`` (hosted platform or local ``Memory``)."""

    def __init__(
        self,
        name: str,
        backend: Mem0Backend,
        *,
        unique_text: bool = False,
        event_wait_seconds: float = 30.0,
        where: str | None = None,
        residual: list[dict[str, str]] | None = None,
        pending: PendingAdds | None = None,
    ) -> None:
        self.name = name
        #: where the memories go (``Store.where``; ``Mem0Settings.where``)
        self.where = where
        #: where a removed memory may remain (``Store.residual``; ``Mem0Settings.residual``)
        self.residual = residual
        self.backend = backend
        self.unique_text = unique_text
        self.event_wait_seconds = event_wait_seconds
        #: add events not seen settling (they may still create a memory), by fact id
        self.pending = pending or PendingAdds()

    async def _call(self, what: str, func: Callable[..., T], *args: Any) -> T:
        return await call_sdk(self.name, what, func, *args)

    # -- put ------------------------------------------------------------------------------

    async def put(self, fact: Fact) -> str:
        with withholding(fact_text(fact), fact.value):  # mem0 logs the text it stores
            return await self._put(fact)

    async def _put(self, fact: Fact) -> str:
        metadata = custody_metadata(fact)
        if self.unique_text:
            return await self._add(marked_text(fact), metadata, fact)
        memory_id = await self._add(fact_text(fact), metadata, fact)
        holder = await self._holder(memory_id, fact)
        if holder is None:
            return memory_id
        log.info(
            "%s: mem0 merged fact %s into memory %s of %s; writing it with its id marker",
            self.name, fact.fact_id, memory_id, holder,
        )  # fmt: skip
        marked_id = await self._add(marked_text(fact), metadata, fact)
        holder = await self._holder(marked_id, fact)
        if holder is not None:
            raise StoreError(
                self.name,
                f"mem0 stored fact {fact.fact_id} as memory {marked_id}, which belongs to "
                f"{holder}; refusing to share one memory between two facts",
            )
        return marked_id

    async def _holder(self, memory_id: str, fact: Fact) -> str | None:
        """Who else the memory belongs to: ``None`` when it is this fact's (or unreadable)."""
        try:
            record = await self._call("get", self.backend.get, memory_id)
        except StoreError as exc:
            # Not knowing whose memory this is, deleting it could delete another fact's memory;
            # refuse the write and say how to find the memory if it is this fact's.
            raise StoreError(
                self.name,
                f"reading back memory {memory_id} after the add: {exc.message}; if mem0 created "
                f"it for this write it carries factId {fact.fact_id}",
            ) from exc
        if record is None:
            # Not readable right after the add; nothing shows a merge, so keep the id.
            log.warning("%s: memory %s not readable after add", self.name, memory_id)
            return None
        owner = _owner(record)
        if owner == fact.fact_id:
            return None
        return f"fact {owner}" if owner else "a memory without custody metadata"

    async def _add(self, text: str, metadata: dict[str, Any], fact: Fact) -> str:
        added = await self._call("add", self.backend.add, text, metadata)
        if added.memory_id:
            return added.memory_id
        assert added.event_id is not None
        return await self._await_event(added.event_id, fact)

    async def _await_event(self, event_id: str, fact: Fact) -> str:
        # Recorded before the wait: a failed poll, a cancelled put or a crash leaves the record.
        await self._call(
            f"recording pending add event {event_id} of fact {fact.fact_id}",
            self.pending.record, fact.fact_id, event_id,
        )  # fmt: skip
        state = EventState(done=False)

        async def settled() -> bool:
            nonlocal state
            state = await self._call("add (event poll)", self.backend.event, event_id)
            return state.done

        finished = await poll(
            settled, attempts=None, delay=0.1, max_delay=2.0, timeout=self.event_wait_seconds
        )
        if not finished:
            raise StoreError(
                self.name,
                f"add event {event_id} still pending after {self.event_wait_seconds:g}s; if "
                f"mem0 completes it later, the memory carries factId {fact.fact_id}",
            )
        await self._settled(event_id)
        if state.error:
            raise StoreError(self.name, f"add event {event_id} failed: {state.error}")
        if not state.memory_id:
            raise StoreError(self.name, f"add event {event_id} succeeded without a memory id")
        return state.memory_id

    # -- remove and verify ----------------------------------------------------------------

    async def remove(self, external_id: str, fact: Fact) -> None:
        await self._call("delete", self.backend.delete, external_id)

    def _where_recorded(self) -> str:
        return f" in {self.pending.path}" if self.pending.path else " in this process only"

    async def _settled(self, event_id: str) -> None:
        """Drop a settled event's record; a record left by a failed write only costs a poll."""
        try:
            await run_sync(self.pending.settle, event_id)
        except OSError as exc:
            log.warning(
                "%s: add event %s settled, but dropping its record from %s failed (%s); it is "
                "polled again at the next check", self.name, event_id, self.pending.path, exc,
            )  # fmt: skip

    async def _still_pending(self, fact: Fact) -> str | None:
        """An add event of the fact that has not settled yet, if any."""
        events = await self._call("reading pending add events", self.pending.of_fact, fact.fact_id)
        for event_id in events:
            try:
                state = await self._call("add (event poll)", self.backend.event, event_id)
            except StoreError as exc:
                raise StoreError(
                    self.name,
                    f"{exc.message}; add event {event_id} of fact {fact.fact_id} stays "
                    f"recorded{self._where_recorded()} until the platform reports it settled "
                    "(delete its line only when the platform no longer knows the event)",
                ) from exc
            if not state.done:
                return event_id
            await self._settled(event_id)  # settled: the listing shows its memory
        return None

    async def held_ids(self, fact: Fact) -> list[str]:
        pending = await self._still_pending(fact)
        if pending is not None:
            raise StoreError(
                self.name,
                f"add event {pending} of fact {fact.fact_id} is still pending; the memory it "
                f"may create cannot be looked up yet (recorded{self._where_recorded()})",
            )
        records = await self._call("list by factId", self.backend.by_fact, fact.fact_id)
        return [str(r["id"]) for r in records if r.get("id") and _owner(r) == fact.fact_id]

    async def verify_removed(self, external_id: str, fact: Fact) -> bool:
        if await self._still_pending(fact) is not None:
            return False  # an add of the fact may still create a memory
        if await self._call("get", self.backend.get, external_id) is not None:
            return False
        residue = getattr(self.backend, "residue", None)  # optional: only a backend keeping text
        if residue is not None and await self._call("history", residue, external_id):
            return False
        if await self._call("list by factId", self.backend.by_fact, fact.fact_id):
            return False
        with withholding(fact_text(fact), fact.value):
            hits = await self._call("search", self.backend.search, fact_text(fact))
        return not any(hit.get("id") == external_id or _owner(hit) == fact.fact_id for hit in hits)

    def close(self) -> None:
        """Close the SDK client (and the local vector store's files)."""
        self.backend.close()


def build(settings: Mem0Settings | Mapping[str, Any], *, name: str = "mem0") -> Mem0Store:
    """The store factory the plugin registers: ``build(settings, name=...)``.

    Checks the API key variable at once (a named but unset variable fails startup with its
    name); the platform client itself connects on first use.
    """
    if not isinstance(settings, Mem0Settings):
        settings = Mem0Settings.model_validate(settings)
    backend: Mem0Backend
    if settings.mode == "platform":
        api_key = secret_from_env(name, settings.api_key_env)
        assert api_key is not None  # api_key_env is required by the settings model
        from .platform import PlatformBackend

        backend = PlatformBackend(settings, api_key)
    else:
        from .local import LocalBackend

        try:
            backend = LocalBackend(settings, name)
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(
                name, f"local mem0 did not start: {type(exc).__name__}: {exc}"
            ) from exc
    guard_mem0_loggers()  # after the backend: building it imported the modules that log
    return Mem0Store(
        name,
        backend,
        unique_text=settings.unique_text,
        event_wait_seconds=settings.event_wait_seconds,
        where=settings.where(),
        residual=settings.residual(),
        pending=_pending_adds(settings, name),
    )


def _pending_adds(settings: Mem0Settings, name: str) -> PendingAdds:
    """The platform store's record of pending adds, read once now: a damaged file, a missing
    folder or a lock another process holds past the bound stops startup, naming it (and the
    holder). Local mode never answers ``PENDING``: in-process only."""
    if settings.mode != "platform":
        return PendingAdds()
    where = settings.pending_file or settings.default_pending_file(name, mem0_folder(settings))
    path = Path(where)
    if not path.parent.is_dir():  # never created: a missing folder is a typo or mount
        raise StoreError(
            name, f"pending_file {where}: the folder {path.parent} does not exist; "
            "create it or name a file in an existing folder",
        )  # fmt: skip
    pending = PendingAdds(path)
    try:
        pending.check()
    except PendingFileError as exc:
        raise StoreError(name, f"reading the pending add events failed: {exc}") from exc
    except LockWaitTimeout as exc:  # a holder, not the folder: its text names it, and the cure
        raise StoreError(
            name, f"pending_file {where} could not be checked at startup: {exc}; then start again"
        ) from exc
    except OSError as exc:
        raise StoreError(
            name, f"pending_file {where}: cannot be read and locked ({exc}); name a file in a "
            "folder this process can write (a put records its add there before waiting)",
        ) from exc  # fmt: skip
    return pending

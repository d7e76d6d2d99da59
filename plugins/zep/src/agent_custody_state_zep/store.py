"""The Zep write-through store: one JSON episode per fact, deletes awaited as background tasks.

``refusal`` (asked before any store is written, and by ``put``) names a fact whose episode
data is longer than Zep's cap (``max_episode_chars``, 10,000 characters).

``put`` adds an episode of type ``json`` whose data is the fact's subject, predicate and value
with the custody metadata, and puts the custody metadata on the episode itself, within Zep's
limits (at most 10 keys, scalar values: ``None`` values are dropped). The episode uuid is the
external id. Zep does not de-duplicate episodes, so equal facts are separate episodes, and an
add is sent once by the SDK: an add that failed is sent again (up to ``max_retries`` times, with
back-off) only when the failure proves nothing was stored (a 408, 409 or 429, a connection never
made); one that may have created its episode (a 5xx, a timeout) raises at once. An answer with
``Retry-After`` is waited out (when longer than the back-off), up to ``max_retry_after``; one
asking for longer fails the add at once, saying so, rather than holding the write.

``remove`` starts the delete (``202`` with a task) and polls the task within ``wait_seconds``: a
task that ends ``failed`` or ``partial`` is a failed removal; one still running at the bound is
left to finish in the background, and verification reports the episode until it has.

``held_ids`` (the copies a failed put may have left) is the episode list filtered by the
``factId`` metadata. An add that ended without Zep's answer (a timeout, a dropped connection, a
5xx) may still create its episode, so for ``add_settle_seconds`` after it, or until a copy
turns up, an empty list raises instead of answering "none" (the core's ``Unanswered``): the
cleanup is retried, not settled. The store declares that time as
``settle_seconds``, so ``resume`` after a restart, which no longer knows of the add, keeps the
cleanup owed as long.

``verify_removed`` is true only when the episode reads as not found, the episode list filtered by
the ``factId`` metadata is empty, and an edge search restricted to the episode finds no edge
whose ``episode_uuids`` cite it.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import anyio

from agent_custody_state.plugin import (
    Fact,
    StoreError,
    Unanswered,
    call_sdk,
    custody_metadata,
    embedding_provider,
    fact_text,
    poll,
    residual_window,
    secret_from_env,
    service_copies,
)

from .api import TaskState, ZepGraph
from .settings import ZepSettings
from .unanswered import retry_add, retry_after, zep_status

log = logging.getLogger(__name__)

T = TypeVar("T")
MAX_METADATA_KEYS = 10
_MAX_DELAY = 8.0  # seconds, the longest wait before an add is sent again
_SURROGATE = re.compile("[\ud800-\udfff]")


def episode_data(fact: Fact) -> str:
    """The episode body: subject, predicate and value, then the custody metadata, as JSON."""
    body = {"subject": fact.subject, "predicate": fact.predicate, "value": fact.value}
    body.update(custody_metadata(fact))
    # UTF-8 as is: Zep counts characters, and escapes would be stored literally. A lone
    # surrogate (the ledger takes one in a value) has no UTF-8: it stays a JSON escape, as
    # U+0000 does, so the body is the same JSON and the request can be sent.
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def episode_metadata(fact: Fact) -> dict[str, Any]:
    """The custody metadata as Zep accepts it on an episode (no ``None``, scalars only)."""
    metadata = {k: v for k, v in custody_metadata(fact).items() if v is not None}
    assert len(metadata) <= MAX_METADATA_KEYS
    return metadata


class ZepStore:
    """A ``Store`` writing episodes into one Zep graph."""

    def __init__(
        self,
        name: str,
        graph: ZepGraph,
        *,
        wait_seconds: float = 30.0,
        max_episode_chars: int = 10_000,
        add_settle_seconds: float = 600.0,
        add_retries: int = 2,
        add_retry_delay: float = 1.0,
        max_retry_after: float = 30.0,
    ) -> None:
        self.name = name
        self.graph = graph
        self.wait_seconds = wait_seconds
        self.max_episode_chars = max_episode_chars
        #: Times an add refused without storing anything (``retry_add``) is sent again, the
        #: first after ``add_retry_delay`` seconds, then twice as long each time.
        self.add_retries = add_retries
        self.add_retry_delay = add_retry_delay
        #: The longest ``Retry-After`` an add waits out before it is sent again.
        self.max_retry_after = max_retry_after
        self.unanswered = Unanswered(add_settle_seconds)

    @property
    def settle_seconds(self) -> float:
        """How long an add this store did not see answered may still land
        (``Store.settle_seconds``): ``add_settle_seconds``."""
        return self.unanswered.settle_seconds

    @property
    def where(self) -> str | None:
        """Where the episodes go (``Store.where``), from the graph's settings."""
        settings = getattr(self.graph, "settings", None)
        return settings.where() if isinstance(settings, ZepSettings) else None

    #: Where a removed episode may remain (``Store.residual``): deleting an episode removes
    #: its edges and the nodes only it made, but a node other episodes share keeps the summary
    #: Zep wrote from it (VENDOR-APIS.md), which no check here can read back.
    residual = (
        residual_window(
            "the summaries of graph nodes the episode shares with other episodes: Zep keeps a "
            "node's summary written from the deleted episode's text",
            "the node's summary is rewritten from its remaining episodes, or the node deleted",
        ),
        embedding_provider("the language and embedding models Zep extracts facts with"),
        service_copies("Zep"),
    )

    async def _call(self, what: str, func: Callable[..., T], *args: Any) -> T:
        return await call_sdk(self.name, what, func, *args)

    def _too_long(self, data: str, fact: Fact) -> str | None:
        if len(data) <= self.max_episode_chars:
            return None
        return (
            f"fact {fact.fact_id} is {len(data)} characters as a Zep episode; Zep accepts "
            f"at most {self.max_episode_chars}"
        )

    def refusal(self, fact: Fact) -> str | None:
        """Why Zep cannot take the fact's episode (``Store.refusal``): its data is longer than
        ``max_episode_chars``. Asked before any store is written; ``put`` refuses the same."""
        return self._too_long(episode_data(fact), fact)

    async def put(self, fact: Fact) -> str:
        data = episode_data(fact)
        problem = self._too_long(data, fact)
        if problem is not None:
            raise StoreError(self.name, problem)
        metadata, reference_time = episode_metadata(fact), fact.valid_from or None
        retries = 0
        while True:
            try:
                # A cancel too is noted: the worker thread's request goes on.
                with self.unanswered.sending(fact.fact_id, status_of=zep_status):
                    return await self._call(
                        "episode add", self.graph.add_episode, data, metadata, reference_time
                    )
            except StoreError as exc:
                # Sent again only when nothing was stored: a second episode would be a copy of
                # the fact that no ledger event records (the SDK's own retries are off).
                if retries >= self.add_retries or not retry_add(exc):
                    raise
                delay = self._retry_delay(exc, retries)
            await anyio.sleep(delay)
            retries += 1

    def _retry_delay(self, exc: StoreError, retries: int) -> float:
        """How long to wait before a refused add is sent again: the back-off, or as long as
        Zep's answer asked (``Retry-After``) when longer; past ``max_retry_after``, the add
        fails now (with ``exc`` as its cause) instead of holding the write that long."""
        asked = retry_after(exc)
        if asked is not None and asked > self.max_retry_after:
            raise StoreError(
                self.name,
                f"{exc.message}; Zep asked to wait {_asked(asked)} before the add is sent again, "
                f"longer than max_retry_after ({self.max_retry_after:g}s): nothing was stored, "
                "write the fact again later (or raise max_retry_after)",
            ) from exc
        backoff = min(self.add_retry_delay * 2.0**retries, _MAX_DELAY)
        return max(backoff, asked or 0.0)

    async def remove(self, external_id: str, fact: Fact) -> None:
        task_uuid = await self._call("episode delete", self.graph.delete_episode, external_id)
        if task_uuid is None:
            return  # already gone: removal is idempotent
        state = TaskState("pending")

        async def settled() -> bool:
            nonlocal state
            state = await self._call("delete task poll", self.graph.task, task_uuid)
            return state.done

        if not await poll(
            settled, attempts=None, delay=0.1, max_delay=2.0, timeout=self.wait_seconds
        ):
            # Accepted but not finished: the episode is still there, and verification says so.
            log.warning(
                "%s: delete of episode %s (task %s) still %s after %gs; it continues in Zep",
                self.name, external_id, task_uuid, state.status, self.wait_seconds,
            )  # fmt: skip
            return
        if state.status != "succeeded":
            reason = f": {state.error}" if state.error else ""
            raise StoreError(
                self.name,
                f"delete of episode {external_id} (task {task_uuid}) ended {state.status}{reason}",
            )

    async def held_ids(self, fact: Fact) -> list[str]:
        episodes = await self._call(
            "episode list by factId", self.graph.episodes_for_fact, fact.fact_id
        )
        held = [str(e.uuid_) for e in episodes if getattr(e, "uuid_", None)]
        age = self.unanswered.doubt(fact.fact_id, held)
        if age is not None:
            raise StoreError(
                self.name,
                f"an add of fact {fact.fact_id} ended without Zep's answer {age:.0f}s ago; Zep "
                "may still be creating its episode, which the episode list shows only once it "
                "has, so its copies cannot be told yet: look again "
                f"{self.unanswered.settle_seconds - age:.0f}s later",
            )
        return held

    async def verify_removed(self, external_id: str, fact: Fact) -> bool:
        if await self._call("episode get", self.graph.get_episode, external_id) is not None:
            return False
        if await self._call("episode list by factId", self.graph.episodes_for_fact, fact.fact_id):
            return False
        edges = await self._call(
            "edge search", self.graph.edges_citing, external_id, fact_text(fact)
        )
        return not edges

    def close(self) -> None:
        """Close the SDK's HTTP connections."""
        self.graph.close()


def _asked(seconds: float) -> str:
    """A ``Retry-After`` wait as an error says it: whole seconds rounded up (an HTTP date 30.4 s
    ahead is ``31s``: rounded to ``30s`` it read as no longer than a bound of 30 s), or, for a
    number of seconds too large for a float (``inf``), ``an unbounded time``."""
    return f"{math.ceil(seconds)}s" if math.isfinite(seconds) else "an unbounded time"


def build(settings: ZepSettings | Mapping[str, Any], *, name: str = "zep") -> ZepStore:
    """The store factory the plugin registers: ``build(settings, name=...)``.

    Checks the API key variable at once (a named but unset variable fails startup with its
    name); a ``graph_id`` or ``user_id`` is resolved to the graph's UUID on first use.
    """
    if not isinstance(settings, ZepSettings):
        settings = ZepSettings.model_validate(settings)
    api_key = secret_from_env(name, settings.api_key_env)
    assert api_key is not None  # api_key_env is required by the settings model
    return ZepStore(
        name,
        ZepGraph(settings, api_key),
        wait_seconds=settings.wait_seconds,
        max_episode_chars=settings.max_episode_chars,
        add_settle_seconds=settings.add_settle_seconds,
        add_retries=settings.max_retries,
        max_retry_after=settings.max_retry_after,
    )

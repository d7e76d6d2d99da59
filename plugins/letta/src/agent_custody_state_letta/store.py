"""The Letta adapter: each fact becomes an archival passage of one agent.

Agent archival passages take no free-form metadata, so custody travels as tags (``tags.py``):
``agent-custody``, ``fact:<factId>``, ``space:<space>``, ``receipt:<receiptId>``, ``actor:``,
``provenance:``, ``valid-from:`` and the configured extra tags. Removal is checked by the
fact-id tag, and so are the copies a failed put may have left (``held_ids``: a search filtered
by that tag; the query is the tag itself, since the filter does the matching).

``passages.create`` answers a *list*: a server may split one text into several passages. Every
id is recorded; the external id is their comma-joined list, and removal deletes each one.

``passages.create`` is not retried by the SDK (its other calls are): Letta takes no
idempotency key, so a retry after a timeout or a 5xx the server answered *after* writing (a
gateway's 504) would write a second passage, and the put would record only the second one's id;
the first would outlive every forget. Unretried, the put fails instead, and the core finds the
copy it may have left by the ``fact:`` tag (``held_ids``) and removes it. A create that ended
without the server's answer (a timeout, a dropped connection, a 5xx) may still be running there,
so for ``write_settle_seconds`` after it, or until a copy turns up, ``held_ids`` raises instead of
answering "none" (the core's ``Unanswered``): the cleanup is then retried, not settled. The
store declares that time as ``settle_seconds``, so ``resume`` after a restart, which no longer
knows of the write, keeps the cleanup owed as long.

``letta-client`` is synchronous here (its httpx client is thread-safe and, unlike the async
one, not bound to one event loop), so every call runs in a worker thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from letta_client import APIError, Letta, NotFoundError

from agent_custody_state.plugin import (
    Fact,
    StoreError,
    Unanswered,
    embedding_provider,
    fact_text,
    guard_logger,
    public_url,
    residual_window,
    run_sync,
    secret_from_env,
    service_copies,
)

from .settings import LettaSettings
from .tags import custody_tags, fact_tag
from .unanswered import letta_status

__all__ = ["LettaStore", "build", "split_ids"]

# The SDK logs each request's options (body and query: the fact text) and URL at DEBUG.
guard_logger("letta_client._base_client")

T = TypeVar("T")

#: Page size for the listing check; the listing is narrowed by the fact's text first.
LIST_PAGE = 100
#: Upper bound on listing pages per check, so a huge archive cannot stall a verification.
MAX_LIST_PAGES = 20
#: UTF-8 bytes of the fact text sent as a search query: the checks travel in the query string,
#: and proxies in front of Letta refuse long request targets (nginx: 8 KiB, percent-encoded).
QUERY_BYTES = 1024


def query_text(fact: Fact) -> str:
    """A prefix of the fact text short enough for a URL (the ``fact:`` tag does the matching)."""
    return fact_text(fact).encode()[:QUERY_BYTES].decode(errors="ignore")


def split_ids(external_id: str) -> list[str]:
    """The passage ids an external id stands for (``"passage-a,passage-b"`` -> two ids)."""
    return [part.strip() for part in external_id.split(",") if part.strip()]


class LettaStore:
    """A write-through store over one Letta agent's archival memory."""

    def __init__(
        self,
        name: str,
        client: Letta,
        agent_id: str,
        *,
        tags: Iterable[str] = (),
        write_settle_seconds: float = 600.0,
    ) -> None:
        self.name = name
        self.client = client
        self.agent_id = agent_id
        self.tags = list(tags)
        self.unanswered = Unanswered(write_settle_seconds)

    @property
    def settle_seconds(self) -> float:
        """How long a create this store did not see answered may still land
        (``Store.settle_seconds``): ``write_settle_seconds``."""
        return self.unanswered.settle_seconds

    @property
    def where(self) -> str:
        """Where the passages go (``Store.where``): the server (no userinfo, query or fragment)
        and the agent. No secret, no network call."""
        return f"{public_url(str(self.client.base_url))} agent:{self.agent_id}"

    @property
    def residual(self) -> list[dict[str, str]]:
        """Where a removed passage may remain (``Store.residual``): the server deletes its row
        (a SQL hard delete) and, on Letta Cloud, its vector copy best-effort (a failure there
        is only logged: VENDOR-APIS.md)."""
        return [
            residual_window(
                f"the Letta server's database ({public_url(str(self.client.base_url))}): the "
                "deleted passage's old row version, its WAL, replicas and backups, and the "
                "archive's vector copy, which Letta Cloud deletes best-effort",
                "the database vacuums and recycles its WAL, the vector copy is deleted, and "
                "the backups expire",
            ),
            embedding_provider("the archive's embedding model"),
            service_copies("the Letta server"),
        ]

    def __repr__(self) -> str:
        at = public_url(str(self.client.base_url))  # no userinfo (a password), no query
        return f"<LettaStore {self.name} agent={self.agent_id} at {at}>"

    async def _call(self, what: str, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run one SDK call in a thread; turn its errors into a ``StoreError`` naming it."""
        try:
            return await run_sync(func, *args, **kwargs)
        except APIError as exc:
            raise StoreError(self.name, f"{what} failed: {exc}") from exc

    def _creator(self) -> Letta:
        """The client without SDK retries, for the create (see the module docstring); the same
        connections and credentials (``with_options`` would fall back to ``LETTA_API_KEY`` for
        a client without a key)."""
        creator = self.client.with_options(max_retries=0)
        creator.api_key = self.client.api_key
        return creator

    async def put(self, fact: Fact) -> str:
        # A cancel too is noted: the worker thread's request goes on.
        with self.unanswered.sending(fact.fact_id, status_of=letta_status):
            passages = await self._call(
                f"writing fact {fact.fact_id} to agent {self.agent_id}",
                self._creator().agents.passages.create,
                self.agent_id,
                text=fact_text(fact),
                tags=custody_tags(fact, self.tags),
            )
        ids = [p.id for p in passages if p.id]
        if not ids:
            raise StoreError(self.name, f"Letta created no passage for fact {fact.fact_id}")
        return ",".join(ids)

    async def remove(self, external_id: str, fact: Fact) -> None:
        failures: list[str] = []
        # Try every passage even after a failure, so one bad id leaves as little behind as
        # possible; then report all that failed.
        for passage_id in split_ids(external_id):
            try:
                await run_sync(
                    self.client.agents.passages.delete, passage_id, agent_id=self.agent_id
                )
            except NotFoundError:
                continue  # already gone: removal is idempotent
            except APIError as exc:
                failures.append(f"{passage_id}: {exc}")
        if failures:
            raise StoreError(
                self.name,
                f"removing fact {fact.fact_id} from agent {self.agent_id} failed for "
                + "; ".join(failures),
            )

    async def held_ids(self, fact: Fact) -> list[str]:
        marker = fact_tag(fact)
        found = await self._call(
            f"looking up fact {fact.fact_id} in agent {self.agent_id}",
            self.client.agents.passages.search,
            self.agent_id,
            query=marker,
            tags=[marker],
            top_k=LIST_PAGE,
        )
        held = [hit.id for hit in found.results if hit.id and marker in (hit.tags or [])]
        age = self.unanswered.doubt(fact.fact_id, held)
        if age is not None:
            raise StoreError(
                self.name,
                f"a write of fact {fact.fact_id} to agent {self.agent_id} ended without Letta's "
                f"answer {age:.0f}s ago; the server may still be storing its passage, which no "
                f"search shows until it has, so its copies cannot be told yet: look again "
                f"{self.unanswered.settle_seconds - age:.0f}s later",
            )
        return held

    async def verify_removed(self, external_id: str, fact: Fact) -> bool:
        """Gone when neither a tag search nor the text-filtered listing shows a passage of it.

        A hit counts when it has one of the recorded ids or carries the fact's tag, so a
        passage written for the fact under another id is caught too.
        """
        ids, marker = set(split_ids(external_id)), fact_tag(fact)

        def ours(passage_id: str | None, tags: list[str] | None) -> bool:
            return passage_id in ids or marker in (tags or [])

        text = query_text(fact)
        found = await self._call(
            f"searching agent {self.agent_id} for fact {fact.fact_id}",
            self.client.agents.passages.search,
            self.agent_id,
            query=text,
            tags=[marker],
            top_k=max(10, len(ids) + 1),
        )
        if any(ours(hit.id, hit.tags) for hit in found.results):
            return False
        after: str | None = None
        for _ in range(MAX_LIST_PAGES):
            page = await self._call(
                f"listing agent {self.agent_id} for fact {fact.fact_id}",
                self.client.agents.passages.list,
                self.agent_id,
                search=text,
                limit=LIST_PAGE,
                **({"after": after} if after else {}),
            )
            if any(ours(p.id, p.tags) for p in page):
                return False
            if len(page) < LIST_PAGE or not page[-1].id:
                return True
            after = page[-1].id
        return False  # could not see the end of the listing: do not claim it is gone


def build(settings: LettaSettings, *, name: str) -> LettaStore:
    """The factory named in the registration: a store from its validated settings."""
    api_key = secret_from_env(name, settings.api_key_env, what="Letta API key")
    client = Letta(
        api_key=api_key,
        base_url=settings.base_url,
        project=settings.project,
        timeout=settings.timeout,
        max_retries=settings.max_retries,
    )
    if api_key is None:
        # The SDK falls back to LETTA_API_KEY; "no key configured" must mean no credentials sent.
        client.api_key = None
    return LettaStore(
        name,
        client,
        settings.agent_id,
        tags=settings.tags,
        write_settle_seconds=settings.write_settle_seconds,
    )

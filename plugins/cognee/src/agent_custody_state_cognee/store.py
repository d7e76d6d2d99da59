"""The Cognee adapter: each fact becomes one data item of a dataset, over Cognee's REST API.

Cognee ships no REST client package, so this speaks HTTP with ``httpx`` (natively async; a
short-lived client per operation, so a store is not tied to one event loop).

* put: ``POST /api/v1/add`` (multipart) with the text as a ``text/plain`` file part, exactly one
  ``labels`` entry and one ``external_metadata`` object (the custody metadata). The item's id is
  ``data_ingestion_info[0].data_id`` of the snake_case reply.
* Cognee reuses the data id for identical content, so two facts with equal text would share one
  item and removing one would remove both. The stored content therefore ends with a marker line
  naming the fact id (``content_for``), which makes it unique per fact.
* remove: ``DELETE /api/v1/datasets/{dataset}/data/{data}``. It answers 200 for unknown ids too,
  so its status proves nothing; only the listing does.
* verify: ``GET /api/v1/datasets/{dataset}/data`` (camelCase): gone when neither the data id
  nor any item whose ``externalMetadata.factId`` is the fact's is listed. A 404 there proves
  nothing (Cognee answers it for a dataset the credentials may not read, too), so the check
  raises and the removal is reported ``unverified``.
* held_ids (the copies a failed put may have left): the same listing, by ``factId``; a dataset
  configured by name and never answered for is found in ``GET /api/v1/datasets``. An add that
  ended without Cognee's answer (a timeout, a dropped connection, a 5xx) may still be running
  there, so for ``add_settle_seconds`` after it, or until a copy turns up, an empty listing
  raises instead of answering "none" (the core's ``Unanswered``): the cleanup is retried, not
  settled. The store declares that time as ``settle_seconds``, so ``resume`` after a restart,
  which no longer knows of the add, keeps the cleanup owed as long.

The external id is ``<dataset id>/<data id>``, so removal finds the item even if the configured
dataset changes later.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx

from agent_custody_state.plugin import (
    Fact,
    StoreError,
    Unanswered,
    custody_metadata,
    embedding_provider,
    fact_text,
    may_have_landed,
    public_url,
    residual_window,
    secret_from_env,
    service_copies,
)

from .settings import CogneeSettings

__all__ = ["CogneeStore", "build", "content_for", "split_external_id", "strip_marker"]

#: Upper bound on listing pages per check, so a huge dataset cannot stall a verification.
MAX_PAGES = 100


def marker(fact_id: str) -> str:
    return f"\n\n[agent-custody fact:{fact_id}]"


def content_for(fact: Fact) -> str:
    """What is uploaded: the SPEC 6 text plus a line naming the fact (defeats content dedupe)."""
    return fact_text(fact) + marker(fact.fact_id)


def strip_marker(content: str, fact_id: str) -> str | None:
    """The fact text of uploaded content, or ``None`` when it is not ``fact_id``'s content."""
    suffix = marker(fact_id)
    return content[: -len(suffix)] if content.endswith(suffix) else None


def split_external_id(external_id: str) -> tuple[str, str]:
    """``"<dataset>/<data>"`` -> the two ids (both must be UUIDs)."""
    dataset_id, _, data_id = external_id.partition("/")
    try:
        return str(uuid.UUID(dataset_id)), str(uuid.UUID(data_id))
    except ValueError:
        raise ValueError(
            f"not a Cognee external id '<dataset id>/<data id>': {external_id!r}"
        ) from None


def _detail(response: httpx.Response) -> str:
    text = response.text.strip()
    return text if len(text) <= 300 else text[:300] + "..."


class CogneeStore:
    """A write-through store over one Cognee dataset."""

    #: ``verify_removed`` lists the dataset by data id and the fact id marker, never by text, so
    #: it can tell a removal finished after a crash, once the value is erased (``outbox``).
    verify_without_value = True

    def __init__(
        self,
        name: str,
        url: str,
        *,
        dataset_id: str | None = None,
        dataset_name: str | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 30.0,
        page_size: int = 100,
        transport: httpx.AsyncBaseTransport | None = None,
        add_settle_seconds: float = 600.0,
    ) -> None:
        if (dataset_id is None) == (dataset_name is None):
            raise ValueError("give exactly one of dataset_id and dataset_name")
        self.name = name
        self.url = url.rstrip("/")
        self.dataset_id = dataset_id
        self.dataset_name = dataset_name
        self.headers = dict(headers or {})
        self.timeout = timeout
        self.page_size = page_size
        self.transport = transport  # tests may inject one (httpx.MockTransport)
        self.unanswered = Unanswered(add_settle_seconds)
        # Building an SSL context costs ~30 ms; build it once, not once per short-lived client.
        self._ssl = httpx.create_ssl_context()

    @property
    def settle_seconds(self) -> float:
        """How long an add this store did not see answered may still land
        (``Store.settle_seconds``): ``add_settle_seconds``."""
        return self.unanswered.settle_seconds

    @property
    def where(self) -> str:
        """Where the items go (``Store.where``): the server, without userinfo, query or
        fragment. Not the dataset: each external id names its own (``<dataset>/<data>``), so a
        changed dataset setting still removes and checks the copy where it is."""
        return public_url(self.url)

    #: Where a removed item may remain (``Store.residual``): the data item and its raw file
    #: go, and the listing check sees only items; what ``cognify`` derived from the text, if
    #: it ran on the dataset, is not listed there.
    residual = (
        residual_window(
            "what cognify derived from the text, if it ran on the dataset: chunks, summaries, "
            "graph nodes and edges, and their vectors in Cognee's graph and vector databases",
            "Cognee deletes them with the item, the dataset, or its forget of everything",
        ),
        embedding_provider("the language and embedding models cognify used"),
        service_copies("the Cognee server"),
    )

    def __repr__(self) -> str:
        dataset = self.dataset_id or self.dataset_name
        return f"<CogneeStore {self.name} dataset={dataset} at {self.where}>"

    async def _request(self, what: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One HTTP call; transport failures become a ``StoreError`` saying what was tried."""
        try:
            async with httpx.AsyncClient(
                base_url=self.url, headers=self.headers, timeout=self.timeout,
                transport=self.transport, verify=self._ssl,
            ) as client:  # fmt: skip
                return await client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise StoreError(self.name, f"{what} failed: {type(exc).__name__}: {exc}") from exc

    def _refused(self, what: str, response: httpx.Response) -> StoreError:
        return StoreError(
            self.name, f"{what}: Cognee answered HTTP {response.status_code}: {_detail(response)}"
        )

    # -- put -----------------------------------------------------------------------------------

    async def put(self, fact: Fact) -> str:
        what = f"adding fact {fact.fact_id} to dataset {self.dataset_id or self.dataset_name}"
        form = {
            "labels": json.dumps([f"agent-custody:{fact.fact_id}"]),
            "external_metadata": json.dumps([custody_metadata(fact)], ensure_ascii=False),
        }
        if self.dataset_id:
            form["datasetId"] = self.dataset_id
        else:
            form["datasetName"] = self.dataset_name or ""
        upload = (f"agent-custody-{fact.fact_id}.txt", content_for(fact).encode(), "text/plain")
        # A cancel too is noted: the server goes on with the add.
        with self.unanswered.sending(fact.fact_id) as sent:
            response = await self._request(
                what, "POST", "/api/v1/add", data=form, files={"data": upload}
            )
        if response.status_code != 200:
            if may_have_landed(status=response.status_code):
                self.unanswered.note(fact.fact_id, sent)
            raise self._refused(what, response)
        try:
            reply = response.json()
        except ValueError:
            raise self._refused(what, response) from None
        dataset_id = reply.get("dataset_id") if isinstance(reply, dict) else None
        if not isinstance(dataset_id, str):
            raise StoreError(self.name, f"{what}: the reply names no dataset_id: {reply!r}")
        if self.dataset_id is None:
            self.dataset_id = dataset_id  # a name resolves once; later calls use the id
        data_id = _ingested_id(reply)
        if data_id is None:
            # Older servers (or background runs) omit data_ingestion_info: find it by listing.
            items = await self._items(dataset_id, fact, what) or []
            data_id = items[0].get("id") if items else None
        if not isinstance(data_id, str) or not data_id:
            self.unanswered.note(fact.fact_id, sent)  # accepted: a background run may store it
            raise StoreError(self.name, f"{what}: Cognee reported no data id for the item")
        return f"{dataset_id}/{data_id}"

    # -- remove and verify ---------------------------------------------------------------------

    def _ids(self, external_id: str) -> tuple[str, str]:
        try:
            return split_external_id(external_id)
        except ValueError as exc:
            raise StoreError(self.name, str(exc)) from exc

    async def remove(self, external_id: str, fact: Fact) -> None:
        dataset_id, data_id = self._ids(external_id)
        what = f"removing fact {fact.fact_id} (data {data_id}) from dataset {dataset_id}"
        response = await self._request(
            what, "DELETE", f"/api/v1/datasets/{dataset_id}/data/{data_id}"
        )
        # 404: the dataset is gone, and its items with it. Any 2xx is only "accepted":
        # Cognee answers 200 for unknown ids, so verification re-lists.
        if response.status_code != 404 and not response.is_success:
            raise self._refused(what, response)

    async def verify_removed(self, external_id: str, fact: Fact) -> bool:
        dataset_id, data_id = self._ids(external_id)
        what = f"listing dataset {dataset_id} for fact {fact.fact_id}"
        held = await self._items(dataset_id, fact, what, data_id=data_id)
        return held == [] if held is not None else False

    async def held_ids(self, fact: Fact) -> list[str]:
        what = f"looking up fact {fact.fact_id} in dataset {self.dataset_id or self.dataset_name}"
        held = await self._listed(fact, what)
        age = self.unanswered.doubt(fact.fact_id, held)
        if age is not None:
            later = self.unanswered.settle_seconds - age
            raise StoreError(
                self.name,
                f"{what}: an add of it ended {age:.0f}s ago without Cognee naming the item; the server "
                "may still be ingesting it, and the listing shows the item only once it has, so "
                f"its copies cannot be told yet: look again {later:.0f}s later",
            )
        return held

    async def _listed(self, fact: Fact, what: str) -> list[str]:
        dataset_id = self.dataset_id or await self._dataset_named(what)
        if dataset_id is None:
            return []  # no dataset of that name: nothing was ever added to it
        items = await self._items(dataset_id, fact, what)
        if items is None:
            raise StoreError(self.name, f"{what}: the listing did not end within {MAX_PAGES} pages")
        return [f"{dataset_id}/{item['id']}" for item in items if isinstance(item.get("id"), str)]

    async def _dataset_named(self, what: str) -> str | None:
        response = await self._request(what, "GET", "/api/v1/datasets")
        if response.status_code != 200:
            raise self._refused(what, response)
        datasets = response.json()
        if not isinstance(datasets, list):
            raise StoreError(self.name, f"{what}: expected a list, got {datasets!r:.200}")
        for dataset in datasets:
            if isinstance(dataset, dict) and dataset.get("name") == self.dataset_name:
                return str(dataset.get("id"))
        return None

    async def _items(
        self, dataset_id: str, fact: Fact, what: str, *, data_id: str | None = None
    ) -> list[dict[str, Any]] | None:
        """Listed items that are the fact's (by data id or ``externalMetadata.factId``).

        ``[]`` when none; ``None`` when the listing could not be read to its end.
        """
        found: list[dict[str, Any]] = []
        for page in range(MAX_PAGES):
            response = await self._request(
                what, "GET", f"/api/v1/datasets/{dataset_id}/data",
                params={"limit": self.page_size, "offset": page * self.page_size},
            )  # fmt: skip
            if response.status_code == 404:
                if data_id is not None:
                    # Cognee answers 404 for a dataset that is gone *and* for one these
                    # credentials may not read: not a proof that the item is gone.
                    raise StoreError(
                        self.name,
                        f"{what}: Cognee answered 404 for dataset {dataset_id}: it is gone, or "
                        "these credentials may not read it; the removal cannot be verified",
                    )
                return found  # no dataset, no items (nothing a failed put could have left)
            if response.status_code != 200:
                raise self._refused(what, response)
            items = response.json()
            if not isinstance(items, list):
                raise StoreError(self.name, f"{what}: expected a list, got {items!r:.200}")
            found += [item for item in items if _is_ours(item, fact.fact_id, data_id)]
            # A server that ignores paging answers everything at once (more than a page).
            if len(items) != self.page_size:
                return found
        return None


def _is_ours(item: Any, fact_id: str, data_id: str | None) -> bool:
    if not isinstance(item, dict):
        return False
    metadata = item.get("externalMetadata")
    by_fact = isinstance(metadata, dict) and metadata.get("factId") == fact_id
    return by_fact or (data_id is not None and item.get("id") == data_id)


def _ingested_id(reply: dict[str, Any]) -> str | None:
    info = reply.get("data_ingestion_info")
    if isinstance(info, list) and info and isinstance(info[0], dict):
        data_id = info[0].get("data_id")
        return str(data_id) if data_id else None
    return None


def _auth_headers(settings: CogneeSettings, name: str) -> dict[str, str]:
    api_key = secret_from_env(name, settings.api_key_env, what="Cognee API key")
    if api_key is not None:
        return {"X-Api-Key": api_key}
    token = secret_from_env(name, settings.token_env, what="Cognee bearer token")
    if token is not None:
        return {"Authorization": f"Bearer {token}"}
    return {}  # a server run with ENABLE_BACKEND_ACCESS_CONTROL=false


def build(settings: CogneeSettings, *, name: str) -> CogneeStore:
    """The factory named in the registration: a store from its validated settings."""
    return CogneeStore(
        name,
        settings.url,
        dataset_id=str(settings.dataset_id) if settings.dataset_id else None,
        dataset_name=settings.dataset_name,
        headers=_auth_headers(settings, name),
        timeout=settings.timeout,
        page_size=settings.page_size,
        add_settle_seconds=settings.add_settle_seconds,
    )

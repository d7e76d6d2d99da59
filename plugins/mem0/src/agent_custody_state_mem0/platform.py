"""The hosted mem0 platform through ``mem0ai``'s ``MemoryClient``.

The client is built on first use, in a worker thread, because its constructor makes a network
call (``GET /v1/ping/``): a server whose mem0 is briefly unreachable still starts, and the
first write reports the problem as that store's refusal. A failed construction is retried on
the next call.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any
from urllib.parse import quote

import httpx

from .backend import Added, EventState, Record, first_id
from .sdk import import_mem0
from .settings import Mem0Settings

# Search queries are the fact text; very long values add nothing to finding our own memory.
_QUERY_CHARS = 1000
_PAGE = 100


class _ExpectedNotFound(logging.Filter):
    """Drops the SDK's error log for a 404: a removal check *expects* the memory to be gone."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "404 Not Found" not in record.getMessage()


_QUIET_404 = _ExpectedNotFound()


class PlatformBackend:
    """``Mem0Backend`` over the hosted API."""

    def __init__(self, settings: Mem0Settings, api_key: str) -> None:
        mem0 = import_mem0(settings)
        from mem0.exceptions import MemoryNotFoundError

        self._client_class = mem0.MemoryClient
        sdk_log = logging.getLogger("mem0.client.utils")
        if _QUIET_404 not in sdk_log.filters:
            sdk_log.addFilter(_QUIET_404)
        self._not_found = MemoryNotFoundError
        self._settings = settings
        self._api_key = api_key
        self._client: Any = None
        self._lock = threading.Lock()
        self._scope = {
            key: value
            for key, value in (
                ("user_id", settings.user_id),
                ("agent_id", settings.agent_id),
                ("app_id", settings.app_id),
            )
            if value
        }

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                http = httpx.Client(timeout=self._settings.timeout)
                try:
                    self._client = self._client_class(
                        api_key=self._api_key, host=self._settings.host, client=http
                    )
                except Exception as exc:
                    http.close()
                    # The constructor's key check fails with a bare ValueError; say what it was.
                    where = self._settings.host or "the default mem0 host"
                    first_line = (str(exc).splitlines() or [type(exc).__name__])[0]
                    raise ConnectionError(
                        f"mem0 client check (GET /v1/ping/ on {where}) failed: {first_line}"
                    ) from exc
            return self._client

    def _filters(self, *extra: dict[str, Any]) -> dict[str, Any]:
        # The platform wants entity ids inside filters, never at the top level of a read.
        return {"AND": [*({k: v} for k, v in self._scope.items()), *extra]}

    def add(self, text: str, metadata: dict[str, Any]) -> Added:
        reply = self.client.add(
            [{"role": "user", "content": text}], infer=False, metadata=metadata, **self._scope
        )
        if not isinstance(reply, dict):
            raise RuntimeError(f"unexpected add reply {reply!r:.200}")
        memory_id = first_id(reply.get("results"))
        if memory_id:
            return Added(memory_id=memory_id)
        status = str(reply.get("status") or "").upper()
        if reply.get("event_id") and status in ("PENDING", "RUNNING", ""):
            return Added(event_id=str(reply["event_id"]))
        raise RuntimeError(f"add returned no memory id (status {status or 'none'}): {reply!r:.200}")

    def event(self, event_id: str) -> EventState:
        # No SDK method for events; the SDK's own httpx client carries base URL and auth.
        response = self.client.client.get(f"/v1/event/{quote(event_id, safe='')}/")
        response.raise_for_status()
        data = response.json()
        status = str(data.get("status") or "").upper()
        if status == "SUCCEEDED":
            return EventState(done=True, memory_id=first_id(data.get("results")))
        if status == "FAILED":
            return EventState(done=True, error=str(data.get("error") or "event failed"))
        return EventState(done=False)

    def get(self, memory_id: str) -> Record | None:
        try:
            record = self.client.get(memory_id)
        except self._not_found:
            return None
        return record if isinstance(record, dict) else None

    def delete(self, memory_id: str) -> None:
        # Already gone is not an error: removal is idempotent.
        with contextlib.suppress(self._not_found):
            self.client.delete(memory_id)

    def residue(self, memory_id: str) -> bool:
        # The platform's history of a deleted memory has no documented delete; not checked.
        return False

    def by_fact(self, fact_id: str) -> list[Record]:
        reply = self.client.get_all(
            filters=self._filters({"metadata": {"factId": fact_id}}), page_size=_PAGE
        )
        return list(reply.get("results") or [])

    def search(self, text: str) -> list[Record]:
        # The platform drops hits under 0.1 by default; a removal check wants every hit.
        reply = self.client.search(
            text[:_QUERY_CHARS], filters=self._filters(), threshold=0.0, top_k=_PAGE
        )
        return list(reply.get("results") or [])

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.client.close()

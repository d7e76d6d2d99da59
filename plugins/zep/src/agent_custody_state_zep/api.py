"""The few Zep v4 calls the store makes, as blocking methods over the real ``zep-cloud`` SDK.

Each method runs in a worker thread (the store calls it through ``storekit.call_sdk``). Outcomes
that are not failures are answered here (a 404 on a read or a delete means "gone"); every other
SDK error is re-raised as ``ZepRequestError`` with a one-line message (the SDK's own ``str``
dumps all response headers).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from .settings import ZepSettings

if TYPE_CHECKING:  # the SDK is imported on first use (conformance PH-2)
    from zep_cloud.core.request_options import RequestOptions

T = TypeVar("T")

#: Task states after which nothing more happens.
TERMINAL = frozenset({"succeeded", "failed", "partial"})
# Search queries are the fact text; a long one adds nothing to finding edges of one episode.
_QUERY_CHARS = 400
_PAGE = 50
#: ``request_options`` of a call the SDK must send once (its retries would repeat a write).
_ONE_ATTEMPT: RequestOptions = {"max_retries": 0}


class ZepRequestError(Exception):
    """A Zep API call failed (HTTP status, error code and message in one line); ``status`` is
    the HTTP status Zep answered, ``None`` when the failure was not Zep's answer;
    ``retry_after`` its ``Retry-After`` header as sent (seconds or an HTTP date), if any."""

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


@dataclass(frozen=True)
class TaskState:
    status: str
    error: str | None = None

    @property
    def done(self) -> bool:
        return self.status in TERMINAL


def describe(exc: Any) -> str:
    """``HTTP <status> <code>: <message>`` from an SDK ``ApiError``."""
    body = exc.body
    if hasattr(body, "model_dump"):  # typed errors (401, 404, ...) arrive parsed as models
        body = body.model_dump()
    detail: Any = body
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            code, message = error.get("code"), error.get("message")
            detail = f"{code}: {message}" if code else message
    return f"HTTP {exc.status_code} {detail}".rstrip()


def header(exc: Any, name: str) -> str | None:
    """The response header ``name`` (lower case) of an SDK ``ApiError``, in any case."""
    headers = getattr(exc, "headers", None) or {}
    return next((str(v) for k, v in headers.items() if str(k).lower() == name), None)


class ZepGraph:
    """One configured graph in one Zep project, through the SDK's sync client."""

    def __init__(self, settings: ZepSettings, api_key: str) -> None:
        from zep_cloud import Zep
        from zep_cloud.core.api_error import ApiError
        from zep_cloud.errors import NotFoundError

        self._api_error = ApiError
        self._not_found = NotFoundError
        self.settings = settings
        # Our own httpx client, so close() does not reach into the SDK's internals.
        self._http = httpx.Client(timeout=settings.timeout, follow_redirects=True)
        kwargs: dict[str, Any] = {
            "api_key": api_key,
            "timeout": settings.timeout,
            "max_retries": settings.max_retries,
            "httpx_client": self._http,
        }
        if settings.base_url:
            kwargs["base_url"] = settings.base_url
        self.client = Zep(**kwargs)
        self._graph_uuid = settings.graph_uuid
        self._lock = threading.Lock()

    def _sdk(self, call: Callable[[], T], *, allow_404: bool = False) -> T:
        """Run one SDK call; ``None`` for a 404 when ``allow_404``, else one-line errors."""
        try:
            return call()
        except self._not_found:
            if allow_404:
                return None  # type: ignore[return-value]
            raise ZepRequestError("HTTP 404 not_found", status=404) from None
        except self._api_error as exc:
            raise ZepRequestError(
                describe(exc), status=exc.status_code, retry_after=header(exc, "retry-after")
            ) from exc

    @property
    def graph_uuid(self) -> str:
        """The graph's UUID, looked up once from ``graph_id`` or ``user_id`` when needed."""
        with self._lock:
            if self._graph_uuid is None:
                self._graph_uuid = self._lookup()
            return self._graph_uuid

    def _lookup(self) -> str:
        s = self.settings
        which = {"graph_id": s.graph_id} if s.graph_id else {"user_id": s.user_id}
        ((key, value),) = which.items()
        try:
            graph = self.client.graph.lookup(**which)
        except self._not_found:
            raise ZepRequestError(f"Zep has no graph for {key} {value!r}") from None
        except self._api_error as exc:
            raise ZepRequestError(f"looking up {key} {value!r}: {describe(exc)}") from exc
        if not graph.uuid_:
            raise ZepRequestError(f"graph lookup for {key} {value!r} returned no uuid")
        return str(graph.uuid_)

    # -- episodes -------------------------------------------------------------------------

    def add_episode(self, data: str, metadata: dict[str, Any], reference_time: str | None) -> str:
        """Send one episode add, without the SDK's retries: a 5xx, a timeout or a dropped
        connection may still create the episode, and a retry would then create a second one
        that no ledger event records. The store retries what proved nothing was stored."""
        graph = self.graph_uuid
        extra = {"reference_time": reference_time} if reference_time else {}
        result = self._sdk(
            lambda: self.client.graph.episode.add(
                graph,
                data=data,
                type="json",
                metadata=metadata,
                source_description=self.settings.source_description,
                request_options=_ONE_ATTEMPT,
                **extra,
            )
        )
        episode = result.episode
        if episode is None or not episode.uuid_:
            raise ZepRequestError("episode add returned no episode uuid")
        return str(episode.uuid_)

    def get_episode(self, episode_uuid: str) -> Any | None:
        graph = self.graph_uuid
        return self._sdk(lambda: self.client.graph.episode.get(graph, episode_uuid), allow_404=True)

    def delete_episode(self, episode_uuid: str) -> str | None:
        """Start the delete; the task uuid to await, or ``None`` when already gone."""
        graph = self.graph_uuid
        result = self._sdk(
            lambda: self.client.graph.episode.delete(graph, episode_uuid), allow_404=True
        )
        if result is None:
            return None
        task = result.task
        if task is None or not task.uuid_:
            raise ZepRequestError("episode delete returned no task to await")
        return str(task.uuid_)

    def task(self, task_uuid: str) -> TaskState:
        task = self._sdk(lambda: self.client.task.get(task_uuid))
        error = task.error
        message = (error.message or error.code) if error is not None else None
        return TaskState(status=str(task.status or "pending"), error=message)

    def episodes_for_fact(self, fact_id: str) -> list[Any]:
        graph = self.graph_uuid
        filters = {"metadata_filters": {"type": "and", "filters": [
            {"property_name": "factId", "operator": "eq", "value": fact_id}]}}  # fmt: skip
        pager = self._sdk(
            lambda: self.client.graph.episode.list(graph, filters=filters, page_size=_PAGE)
        )
        return list(pager.items or [])

    def edges_citing(self, episode_uuid: str, query: str) -> list[Any]:
        """Edges whose ``episode_uuids`` include the episode (edge search filtered by it)."""
        graph = self.graph_uuid
        pager = self._sdk(
            lambda: self.client.graph.search_edges(
                graph,
                query=query[:_QUERY_CHARS],
                filters={"episode_uuids": [episode_uuid]},
                page_size=_PAGE,
            )
        )
        return [e for e in pager.items or [] if episode_uuid in (e.episode_uuids or [])]

    def close(self) -> None:
        self._http.close()

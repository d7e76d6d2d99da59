"""A loopback fake of the hosted mem0 platform API, as ``mem0ai``'s ``MemoryClient`` uses it.

Routes (all need ``Authorization: Token <api_key>``):

* ``GET /v1/ping/``: the key check the SDK runs in its constructor.
* ``POST /v3/memories/add/``: with ``infer: false`` ("direct import") the reply is synchronous
  and carries ``results[*].id``. With ``infer`` omitted or true, or with ``fake.async_add``,
  it answers ``{"event_id", "status": "PENDING"}`` and the memories only appear once
  ``GET /v1/event/{id}/`` has been polled past ``fake.event_polls_pending`` PENDING answers.
* ``GET``/``DELETE /v1/memories/{id}/``: 404 ``{"error": "Memory not found"}`` when absent.
* ``POST /v3/memories/search/`` and ``POST /v3/memories/`` (get_all, paged envelope): entity
  ids must sit inside ``filters``; top-level ones and unknown filter keys are a 400.

Direct import deduplicates like the platform: the same text in the same entity scope maps
onto the existing memory id (switch off with ``fake.dedupe = False``). Search scores with a
word-overlap stand-in and applies the platform's default ``threshold`` of 0.1.

Import it as ``from agent_custody_state_mem0.testing import FakeMem0``; it needs the fake server
base from ``agent-custody-state-conformance``, which ``agent-custody-state-mem0[test]`` installs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from agent_custody_state_conformance.fakeserver import (
    Abort,
    FakeVendorServer,
    Handler,
    Reply,
    Request,
    compare,
    iso_now,
    json_reply,
    similarity,
)

__all__ = ["FakeMem0"]

ENTITY_KEYS = ("user_id", "agent_id", "app_id", "run_id")
# Top-level filter keys the platform accepts; anything else is a 400.
FILTER_KEYS = frozenset(
    {
        "AND", "OR", "NOT", *ENTITY_KEYS, "created_at", "updated_at", "timestamp",
        "expiration_date", "text", "categories", "metadata", "keywords_search",
        "memory_ids", "keywords",
    }
)  # fmt: skip
METADATA_OPS = frozenset({"eq", "ne", "contains"})
DEFAULT_THRESHOLD = 0.1
DEFAULT_TOP_K = 10
DEFAULT_PAGE_SIZE = 100


@dataclass
class _PendingAdd:
    """An asynchronous add: the body to ingest once the event has been polled enough."""

    body: dict[str, Any]
    polls_left: int


class FakeMem0(FakeVendorServer):
    """Fake mem0 platform. ``with FakeMem0(api_key="test-key") as fake: fake.url``.

    Extra switches: ``async_add`` (every add answers PENDING), ``event_polls_pending``
    (PENDING answers an event gives before it settles, default 1), ``event_outcome``
    (``"SUCCEEDED"``, or ``"FAILED"``: the event ends with an error and stores nothing). Extra
    views: ``events``
    (event id -> event body as served). ``complete_events()`` finishes every pending add.
    """

    vendor = "mem0"
    auth_scheme = "Token"

    def __init__(
        self,
        *,
        api_key: str | None = "test-key",
        org_id: str = "org-fake",
        project_id: str = "proj-fake",
        user_email: str = "fake-user@example.com",
    ) -> None:
        super().__init__(api_key=api_key)
        self.org_id = org_id
        self.project_id = project_id
        self.user_email = user_email
        self.async_add = False
        self.event_polls_pending = 1
        self.event_outcome = "SUCCEEDED"
        self.events: dict[str, dict[str, Any]] = {}
        self._pending: dict[str, _PendingAdd] = {}

    def routes(self) -> Iterable[tuple[str, str, str, Handler]]:
        return [
            ("GET", "/v1/ping/", "ping", self._ping),
            ("POST", "/v3/memories/add/", "add", self._add),
            ("GET", "/v1/event/{event_id}/", "event", self._event),
            ("GET", "/v1/memories/{memory_id}/", "get", self._get),
            ("DELETE", "/v1/memories/{memory_id}/", "delete", self._delete),
            ("POST", "/v3/memories/search/", "search", self._search),
            ("POST", "/v3/memories/", "list", self._get_all),
        ]

    def error(self, status: int, message: str, code: str | None = None) -> Reply:
        # DRF answers auth and routing problems under "detail"; the memory views use "error".
        key = "detail" if status in (401, 403, 405) else "error"
        return json_reply(status, {key: message})

    # -- backdoor -----------------------------------------------------------------------

    def complete_events(self) -> None:
        """Finish every pending asynchronous add now, as if the worker caught up."""
        with self.lock:
            for event_id in list(self._pending):
                self._finish(event_id)

    # -- routes -------------------------------------------------------------------------

    def _ping(self, request: Request, params: dict[str, str]) -> Reply:
        return json_reply(
            200,
            {
                "status": "ok",
                "org_id": self.org_id,
                "project_id": self.project_id,
                "user_email": self.user_email,
            },
        )

    def _add(self, request: Request, params: dict[str, str]) -> Reply:
        body = self._body(request)
        self._validate_add(body)
        event_id = self._new_uuid()
        now = iso_now()
        event: dict[str, Any] = {"id": event_id, "event_type": "ADD", "status": "PENDING", "results": [],
                 "error": None, "created_at": now, "updated_at": now}  # fmt: skip
        self.events[event_id] = event
        # The platform only imports synchronously when inference is explicitly off.
        if self.async_add or body.get("infer", True) is not False:
            self._pending[event_id] = _PendingAdd(body, self.event_polls_pending)
            if self.event_polls_pending <= 0:
                self._finish(event_id)
            return json_reply(
                200,
                {
                    "message": "Memory processing has been queued for background execution",
                    "status": "PENDING",
                    "event_id": event_id,
                },
            )
        results = self._ingest(body)
        event.update(status="SUCCEEDED", results=results, updated_at=iso_now())
        return json_reply(
            200,
            {
                "message": "Memories stored successfully",
                "status": "SUCCEEDED",
                "event_id": event_id,
                "results": results,
            },
        )

    def _event(self, request: Request, params: dict[str, str]) -> Reply:
        event = self.events.get(params["event_id"])
        if event is None:
            return self.error(404, "Event not found")
        pending = self._pending.get(params["event_id"])
        if pending is not None:
            if pending.polls_left > 0:
                pending.polls_left -= 1
            else:
                self._finish(params["event_id"])
        return json_reply(200, event)

    def _get(self, request: Request, params: dict[str, str]) -> Reply:
        record = self.items.get(params["memory_id"])
        if record is None:
            return self.error(404, "Memory not found")
        return json_reply(200, _as_listed(record))

    def _delete(self, request: Request, params: dict[str, str]) -> Reply:
        if self._remove(params["memory_id"]) is None:
            return self.error(404, "Memory not found")
        return json_reply(200, {"message": "Memory deleted successfully!"})

    def _search(self, request: Request, params: dict[str, str]) -> Reply:
        body = self._body(request)
        self._reject_top_level_entities(body, "search")
        query = body.get("query")
        if not isinstance(query, str) or not query.strip():
            return self.error(400, "query is required")
        filters = self._checked_filters(body.get("filters"))
        top_k = _number(body.get("top_k"), DEFAULT_TOP_K, int)
        threshold = _number(body.get("threshold"), DEFAULT_THRESHOLD, float)
        scored = []
        for record in self._indexed():
            if self._matches(filters, record):
                score = similarity(query, record["memory"])
                if score >= threshold:
                    scored.append((score, record))
        scored.sort(key=lambda pair: pair[0], reverse=True)
        return json_reply(200, {"results": [_as_hit(r, s) for s, r in scored[:top_k]]})

    def _get_all(self, request: Request, params: dict[str, str]) -> Reply:
        body = self._body(request)
        self._reject_top_level_entities(body, "get_all")
        filters = self._checked_filters(body.get("filters"))
        page = _number(request.arg("page"), 1, int)
        size = _number(request.arg("page_size"), DEFAULT_PAGE_SIZE, int)
        if page < 1 or size < 1:
            return self.error(400, "page and page_size must be positive")
        rows = [r for r in reversed(self._indexed()) if self._matches(filters, r)]  # newest first
        start = (page - 1) * size
        link = f"{self.url}/v3/memories/?page={{}}&page_size={size}"
        return json_reply(
            200,
            {
                "count": len(rows),
                "next": link.format(page + 1) if start + size < len(rows) else None,
                "previous": link.format(page - 1) if page > 1 else None,
                "results": [_as_listed(r) for r in rows[start : start + size]],
            },
        )

    # -- ingestion ----------------------------------------------------------------------

    def _validate_add(self, body: dict[str, Any]) -> None:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise Abort(self.error(400, "messages must be a non-empty list"))
        if any(not isinstance(m, dict) or "role" not in m for m in messages):
            raise Abort(self.error(400, "each message needs a role and content"))
        if not any(self._scope(body).values()):
            raise Abort(
                self.error(400, "At least one of user_id, agent_id, app_id or run_id is required")
            )
        if body.get("metadata") is not None and not isinstance(body["metadata"], dict):
            raise Abort(self.error(400, "metadata must be an object"))

    @staticmethod
    def _scope(body: dict[str, Any]) -> dict[str, Any]:
        # The SDK's typed options may carry entity ids in a flat "filters" object instead.
        filters = body.get("filters")
        nested: dict[str, Any] = filters if isinstance(filters, dict) else {}
        return {key: body.get(key) or nested.get(key) for key in ENTITY_KEYS}

    def _ingest(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        scope = self._scope(body)
        results = []
        for message in body["messages"]:
            text = message.get("content")
            # System prompts are context, not memories; multimodal parts are skipped silently.
            if message.get("role") == "system" or not isinstance(text, str) or not text:
                continue
            digest = hashlib.md5(text.encode()).hexdigest()
            existing = self._find_duplicate(scope, digest) if self.dedupe else None
            if existing is None:
                memory_id = self._new_uuid()
                now = iso_now()
                self._store(
                    memory_id,
                    {
                        "id": memory_id, "memory": text, **scope,
                        "metadata": body.get("metadata"), "categories": [],
                        "created_at": now, "updated_at": now, "expiration_date": None,
                        "immutable": False, "hash": digest,
                    },
                )  # fmt: skip
            else:
                memory_id = existing
            results.append({"id": memory_id, "data": {"memory": text}, "event": "ADD"})
        return results

    def _find_duplicate(self, scope: dict[str, Any], digest: str) -> str | None:
        for memory_id, record in self.items.items():
            same_scope = all(record.get(k) == v for k, v in scope.items())
            if same_scope and record.get("hash") == digest:
                return memory_id
        return None

    def _finish(self, event_id: str) -> None:
        pending = self._pending.pop(event_id)
        if self.event_outcome == "FAILED":
            error = "Memory processing failed"
            self.events[event_id].update(status="FAILED", error=error, updated_at=iso_now())
            return
        results = self._ingest(pending.body)
        self.events[event_id].update(status="SUCCEEDED", results=results, updated_at=iso_now())

    # -- filters ------------------------------------------------------------------------

    def _reject_top_level_entities(self, body: dict[str, Any], call: str) -> None:
        stray = sorted(k for k in ENTITY_KEYS if k in body)
        if stray:
            raise Abort(
                self.error(
                    400,
                    f"Top-level entity parameters {stray} are not supported in {call}(). "
                    "Use filters={'user_id': '...'} instead.",
                )
            )

    def _checked_filters(self, filters: Any) -> dict[str, Any]:
        if not isinstance(filters, dict) or not filters:
            raise Abort(self.error(400, "filters are required and must be a non-empty object"))
        self._check_filter_keys(filters)
        return filters

    def _check_filter_keys(self, filters: dict[str, Any]) -> None:
        unknown = sorted(set(filters) - FILTER_KEYS)
        if unknown:
            raise Abort(self.error(400, f"Invalid filter key(s): {unknown}"))
        for logical in ("AND", "OR", "NOT"):
            for sub in _clauses(filters.get(logical)):
                if not isinstance(sub, dict):
                    raise Abort(self.error(400, f"{logical} takes a list of filter objects"))
                self._check_filter_keys(sub)
        metadata = filters.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise Abort(self.error(400, "metadata filter must be an object"))
        for condition in (metadata or {}).values():
            if isinstance(condition, dict) and not set(condition) <= METADATA_OPS:
                raise Abort(self.error(400, "metadata filters support only eq, ne and contains"))

    def _matches(self, filters: dict[str, Any], record: dict[str, Any]) -> bool:
        try:
            return all(self._clause(k, v, record) for k, v in filters.items())
        except KeyError as unknown_op:
            raise Abort(self.error(400, f"Unsupported filter operator {unknown_op}")) from None

    def _clause(self, key: str, condition: Any, record: dict[str, Any]) -> bool:
        if key == "AND":
            return all(self._matches(sub, record) for sub in _clauses(condition))
        if key == "OR":
            return any(self._matches(sub, record) for sub in _clauses(condition))
        if key == "NOT":
            return not any(self._matches(sub, record) for sub in _clauses(condition))
        if key == "metadata":
            stored = record.get("metadata") or {}
            return all(_condition(c, stored.get(k)) for k, c in condition.items())
        if key == "memory_ids":
            return record["id"] in (condition if isinstance(condition, list) else [condition])
        if key == "categories":
            if isinstance(condition, dict):
                wanted = condition.get("in") or [condition.get("contains")]
            else:
                wanted = condition if isinstance(condition, list) else [condition]
            return any(c in (record.get("categories") or []) for c in wanted)
        if key in ("text", "keywords", "keywords_search"):
            needle = condition.get("contains") if isinstance(condition, dict) else condition
            return compare("icontains", record["memory"], needle)
        # Entity ids and timestamps: a plain value, "*" (any non-null) or an operator object.
        return _condition(condition, record.get("created_at" if key == "timestamp" else key))


def _clauses(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _condition(condition: Any, actual: Any) -> bool:
    if condition == "*":
        return actual is not None
    if isinstance(condition, dict):
        return all(compare(op, actual, expected) for op, expected in condition.items())
    return bool(actual == condition)


def _number(value: Any, default: Any, kind: type) -> Any:
    if value is None:
        return default
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise Abort(json_reply(400, {"error": f"not a number: {value!r}"})) from None


def _as_listed(record: dict[str, Any]) -> dict[str, Any]:
    """The get / get_all shape: the run id comes back as ``session_id``."""
    shown = {k: v for k, v in record.items() if k not in ("run_id", "hash")}
    shown["session_id"] = record.get("run_id")
    return shown


def _as_hit(record: dict[str, Any], score: float) -> dict[str, Any]:
    keys = ("id", "memory", "metadata", *ENTITY_KEYS, "categories", "created_at",
            "updated_at", "expiration_date")  # fmt: skip
    return {**{k: record.get(k) for k in keys}, "score": score}

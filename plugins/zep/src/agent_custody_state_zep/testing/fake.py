"""A loopback fake of the Zep v4 REST API, as ``zep-cloud`` 4.x uses it.

Everything lives under ``/api/v4`` (so ``Zep(base_url=fake.url + "/api/v4")``) and needs
``Authorization: Api-Key <api_key>``. Graphs and users are addressed by Zep-generated UUIDs;
a path id that is not a UUID is a 400 ``invalid_identifier``, as in v4.

Routes: ``POST /graphs``, ``GET /graphs/{g}``, ``POST /graphs/lookup``, ``POST /users``,
``GET /users/{u}``, ``POST /users/lookup``, ``POST /graphs/{g}/episodes`` (202, episode plus
ingestion task), ``GET``/``DELETE /graphs/{g}/episodes/{e}`` (DELETE is 202 with a task; the
episode goes away when that task completes), ``POST /graphs/{g}/episodes/list``,
``POST /graphs/{g}/search/episodes``, ``POST /graphs/{g}/search/edges``, ``GET /tasks/{t}``.

Tasks complete when polled: a delete task answers ``pending`` for ``fake.task_polls_pending``
polls, an ingestion task for ``fake.ingest_polls_pending`` polls. With 0 (the default) the
work is done at once, although the 202 reply still says ``pending`` as the real one does.
``fake.task_outcome`` (``"succeeded"``, ``"failed"`` or ``"partial"``) decides how tasks end;
only a succeeded task has an effect (the task machinery is in ``tasks.py``). Ingestion extracts
one edge per episode whose ``episode_uuids`` cites it; edge search honours
``filters.episode_uuids``. Episode metadata is limited to 10 scalar (or scalar-array) values.
``fake.store_later = N`` makes the next N adds answer 504 before the episode is created, as a
gateway does that gave up while Zep was still handling the request; Zep creates it anyway, when
``fake.finish_adds()`` is called (a client timeout looks the same). ``fake.throttle_adds = N``
makes the next N adds answer 429 (rate limited) with nothing created, with the header
``Retry-After: <fake.retry_after>`` when that is set (seconds or an HTTP date, as text).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from agent_custody_state_conformance.fakeserver import (
    Abort,
    Handler,
    Reply,
    Request,
    compare,
    is_uuid,
    iso_now,
    json_reply,
    similarity,
)

from .tasks import ZepTasks

__all__ = ["FakeZep"]

EPISODE_TYPES = ("text", "json", "message")
MAX_METADATA_KEYS = 10
LIST_PAGE_SIZE = 50
SEARCH_PAGE_SIZE = 10
SEARCH_FILTER_KEYS = frozenset({"metadata_filters", "content_policy_violated"})
_ERROR_CODES = {400: "bad_request", 401: "unauthorized", 404: "not_found",
                405: "method_not_allowed", 409: "conflict", 500: "internal_error"}  # fmt: skip


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)


class FakeZep(ZepTasks):
    """Fake Zep v4. ``with FakeZep(api_key="test-key") as fake: fake.url + "/api/v4"``.

    Extra switches: ``task_polls_pending``, ``ingest_polls_pending``, ``task_outcome``,
    ``max_episode_chars`` (default 10 000). Extra views: ``graphs``, ``users``, ``tasks``,
    ``edges`` (uuid -> wire body). ``items`` holds the episodes. Helpers: ``create_graph()``
    makes a graph without going through HTTP, ``complete_tasks()`` finishes pending tasks.
    """

    vendor = "zep"
    prefix = "/api/v4"
    auth_scheme = "Api-Key"

    def __init__(self, *, api_key: str | None = "test-key") -> None:
        super().__init__(api_key=api_key)
        self.max_episode_chars = 10_000
        self.graphs: dict[str, dict[str, Any]] = {}
        self.users: dict[str, dict[str, Any]] = {}
        self.edges: dict[str, dict[str, Any]] = {}
        self.store_later = 0
        self.throttle_adds = 0
        self.retry_after: str | None = None
        self._unfinished: list[dict[str, Any]] = []

    def finish_adds(self) -> None:
        """Create the episodes of the adds ``store_later`` answered 504 for (Zep caught up)."""
        with self.lock:
            unfinished, self._unfinished = self._unfinished, []
            for episode in unfinished:
                self._accept(episode)

    def routes(self) -> Iterable[tuple[str, str, str, Handler]]:
        episode = "/graphs/{graph}/episodes/{episode}"
        return [
            ("POST", "/graphs", "create_graph", self._create_graph),
            ("POST", "/graphs/lookup", "lookup_graph", self._lookup_graph),
            ("GET", "/graphs/{graph}", "get_graph", self._get_graph),
            ("POST", "/users", "create_user", self._create_user),
            ("POST", "/users/lookup", "lookup_user", self._lookup_user),
            ("GET", "/users/{user}", "get_user", self._get_user),
            ("POST", "/graphs/{graph}/episodes", "add", self._add),
            ("POST", "/graphs/{graph}/episodes/list", "list", self._list),
            ("GET", episode, "get", self._get),
            ("DELETE", episode, "delete", self._delete),
            ("POST", "/graphs/{graph}/search/episodes", "search", self._search),
            ("POST", "/graphs/{graph}/search/edges", "search_edges", self._search_edges),
            ("GET", "/tasks/{task}", "task", self._task),
        ]

    def error(self, status: int, message: str, code: str | None = None) -> Reply:
        # The v4 error envelope, as zep_cloud.types.ApiError / ErrorBody model it.
        body = {"code": code or _ERROR_CODES.get(status, "error"), "message": message,
                "request_id": self._new_uuid()}  # fmt: skip
        return json_reply(status, {"error": body})

    # -- backdoor -----------------------------------------------------------------------

    def create_graph(self, name: str = "fake graph", *, user_uuid: str | None = None) -> str:
        """Create a graph directly and return its UUID (no request is recorded)."""
        with self.lock:
            graph_uuid = self._new_uuid()
            self.graphs[graph_uuid] = {
                "uuid": graph_uuid, "name": name, "description": None, "graph_id": None,
                "type": "user" if user_uuid else "graph", "user_uuid": user_uuid,
                "time_zone": None, "created_at": iso_now(), "updated_at": iso_now(),
            }  # fmt: skip
            return graph_uuid

    # -- graphs and users ---------------------------------------------------------------

    def _create_graph(self, request: Request, params: dict[str, str]) -> Reply:
        body = self._body(request)
        graph_uuid = self.create_graph(body.get("name") or "")
        self.graphs[graph_uuid].update(
            description=body.get("description"), time_zone=body.get("time_zone")
        )
        return json_reply(201, self.graphs[graph_uuid])

    def _get_graph(self, request: Request, params: dict[str, str]) -> Reply:
        graph_uuid, _ = self._resolve(params["graph"])
        return json_reply(200, self.graphs[graph_uuid])

    def _lookup_graph(self, request: Request, params: dict[str, str]) -> Reply:
        body = self._body(request)
        if body.get("user_id"):
            user = self._user_by_id(body["user_id"])
            return json_reply(200, self.graphs[user["graph_uuid"]])
        for graph in self.graphs.values():
            if body.get("graph_id") and graph.get("graph_id") == body["graph_id"]:
                return json_reply(200, graph)
        return self.error(404, "graph not found")

    def _create_user(self, request: Request, params: dict[str, str]) -> Reply:
        body = self._body(request)
        external = body.get("user_id")
        if external and any(u["user_id"] == external for u in self.users.values()):
            return self.error(400, f"user with user_id {external!r} already exists")
        user_uuid = self._new_uuid()
        fields = ("email", "first_name", "last_name", "metadata", "time_zone")
        self.users[user_uuid] = {
            "uuid": user_uuid, "user_id": external, **{k: body.get(k) for k in fields},
            "graph_uuid": self.create_graph(f"user {external or user_uuid}", user_uuid=user_uuid),
            "created_at": iso_now(),
        }  # fmt: skip
        return json_reply(201, self.users[user_uuid])

    def _get_user(self, request: Request, params: dict[str, str]) -> Reply:
        self._require_uuid(params["user"], "user_uuid")
        user = self.users.get(params["user"])
        return json_reply(200, user) if user else self.error(404, "user not found")

    def _lookup_user(self, request: Request, params: dict[str, str]) -> Reply:
        body = self._body(request)
        return json_reply(200, self._user_by_id(body.get("user_id")))

    def _user_by_id(self, external: Any) -> dict[str, Any]:
        for user in self.users.values():
            if external and user["user_id"] == external:
                return user
        raise Abort(self.error(404, "user not found"))

    def _require_uuid(self, value: str, name: str) -> None:
        if not is_uuid(value):
            raise Abort(
                self.error(
                    400,
                    f"{name} must be a Zep-generated UUID; resolve developer-assigned ids "
                    "with lookup",
                    code="invalid_identifier",
                )
            )

    def _resolve(self, graph_or_user: str) -> tuple[str, str | None]:
        """A path graph id to ``(graph_uuid, user_uuid)``; a user UUID names its graph."""
        self._require_uuid(graph_or_user, "graph_uuid")
        if graph_or_user in self.graphs:
            return graph_or_user, self.graphs[graph_or_user].get("user_uuid")
        if graph_or_user in self.users:
            return self.users[graph_or_user]["graph_uuid"], graph_or_user
        raise Abort(self.error(404, "graph not found"))

    # -- episodes -----------------------------------------------------------------------

    def _add(self, request: Request, params: dict[str, str]) -> Reply:
        graph_uuid, user_uuid = self._resolve(params["graph"])
        if self.throttle_adds > 0:
            self.throttle_adds -= 1
            throttled = self.error(429, "Too Many Requests", code="rate_limited")
            if self.retry_after is not None:
                throttled.headers["Retry-After"] = self.retry_after
            return throttled
        body = self._body(request)
        data, kind = body.get("data"), body.get("type") or "text"
        if not isinstance(data, str) or not data.strip():
            return self.error(400, "data is required")
        if len(data) > self.max_episode_chars:
            return self.error(400, f"data exceeds {self.max_episode_chars} characters")
        if kind not in EPISODE_TYPES:
            return self.error(400, f"type must be one of {list(EPISODE_TYPES)}")
        if kind == "json":
            try:
                json.loads(data)
            except ValueError:
                return self.error(400, "data is not valid JSON for type json")
        metadata = self._checked_metadata(body.get("metadata"))
        episode_uuid = self._new_uuid()
        now = iso_now()
        episode = {
            "uuid": episode_uuid, "content": data, "metadata": metadata, "processed": False,
            "graph_uuid": graph_uuid, "user_uuid": user_uuid, "source": kind,
            "source_description": body.get("source_description"),
            "reference_time": body.get("reference_time") or now,
            "document_id": body.get("document_id"), "created_at": now,
        }  # fmt: skip
        if self.store_later > 0:
            self.store_later -= 1
            self._unfinished.append(episode)
            return self.error(504, "Gateway Timeout")
        snapshot, task = self._accept(episode)
        return json_reply(202, {"episode": snapshot, "task": task})

    def _accept(self, episode: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Store the episode and queue its ingestion: the episode as created, and the task."""
        self._store(episode["uuid"], episode)
        snapshot = dict(episode)
        task = self._new_task(
            "add_episode", episode["uuid"], self.ingest_polls_pending, lambda: self._ingest(episode)
        )
        return snapshot, task

    def _checked_metadata(self, metadata: Any) -> dict[str, Any] | None:
        if metadata is None:
            return None
        if not isinstance(metadata, dict):
            raise Abort(self.error(400, "metadata must be an object"))
        if len(metadata) > MAX_METADATA_KEYS:
            raise Abort(self.error(400, f"metadata may have at most {MAX_METADATA_KEYS} keys"))
        for key, value in metadata.items():
            ok = _scalar(value) or (isinstance(value, list) and all(map(_scalar, value)))
            if not ok:
                raise Abort(
                    self.error(
                        400,
                        f"metadata value for {key!r} must be a string, number, boolean "
                        "or an array of those",
                    )
                )
        return dict(metadata)

    def _ingest(self, episode: dict[str, Any]) -> None:
        if episode["uuid"] not in self.items:
            return  # deleted before the worker got to it
        episode["processed"] = True
        edge_uuid = self._new_uuid()
        self.edges[edge_uuid] = {
            "uuid": edge_uuid, "name": "MENTIONS", "fact": episode["content"],
            "episode_uuids": [episode["uuid"]], "graph_uuid": episode["graph_uuid"],
            "user_uuid": episode["user_uuid"], "source_node_uuid": self._new_uuid(),
            "target_node_uuid": self._new_uuid(), "created_at": iso_now(),
            "valid_at": episode["reference_time"], "invalid_at": None, "expired_at": None,
        }  # fmt: skip

    def _episode(self, params: dict[str, str]) -> dict[str, Any]:
        graph_uuid, _ = self._resolve(params["graph"])
        self._require_uuid(params["episode"], "episode_uuid")
        episode = self.items.get(params["episode"])
        if episode is None or episode["graph_uuid"] != graph_uuid:
            raise Abort(self.error(404, "episode not found"))
        return episode

    def _get(self, request: Request, params: dict[str, str]) -> Reply:
        return json_reply(200, self._episode(params))

    def _delete(self, request: Request, params: dict[str, str]) -> Reply:
        episode_uuid = self._episode(params)["uuid"]
        task = self._new_task(
            "delete_episode",
            episode_uuid,
            self.task_polls_pending,
            lambda: self._forget(episode_uuid),
        )
        return json_reply(202, {"task": task})

    def _forget(self, episode_uuid: str) -> None:
        # Edges go with the episode lazily, in _search_edges, so they can lag with it.
        self._remove(episode_uuid)

    def _list(self, request: Request, params: dict[str, str]) -> Reply:
        graph_uuid, _ = self._resolve(params["graph"])
        filters = self._body(request).get("filters") or {}
        rows = [e for e in self._indexed() if self._keep(e, graph_uuid, filters)]
        if filters.get("mentioned_node_uuids"):
            rows = [e for e in rows if e["uuid"] in filters["mentioned_node_uuids"]]
        if request.arg("order") == "desc":
            rows.reverse()
        size = int(request.arg("page_size") or LIST_PAGE_SIZE)
        offset = int(request.arg("cursor") or 0)
        more = offset + size < len(rows)
        return json_reply(
            200,
            {
                "items": rows[offset : offset + size],
                "next_cursor": str(offset + size) if more else None,
                "total_size": len(rows),
            },
        )

    def _search(self, request: Request, params: dict[str, str]) -> Reply:
        graph_uuid, _ = self._resolve(params["graph"])
        body = self._body(request)
        filters = body.get("filters") or {}
        unsupported = sorted(set(filters) - SEARCH_FILTER_KEYS)
        if unsupported:
            return self.error(400, f"episode search does not support filters {unsupported}")
        query = str(body.get("query") or "")
        hits = [
            {**e, "score": similarity(query, e["content"])}
            for e in self._indexed()
            if self._keep(e, graph_uuid, filters)
        ]
        hits.sort(key=lambda hit: hit["score"], reverse=True)
        size = int(request.arg("page_size") or SEARCH_PAGE_SIZE)
        return json_reply(200, {"items": hits[:size], "total_size": len(hits)})

    def _search_edges(self, request: Request, params: dict[str, str]) -> Reply:
        graph_uuid, _ = self._resolve(params["graph"])
        body = self._body(request)
        query = str(body.get("query") or "")
        cited = (body.get("filters") or {}).get("episode_uuids")
        # An edge stays findable while any episode it cites is still indexed (lag included).
        visible = {e["uuid"] for e in self._indexed()}
        for edge_uuid in [k for k, v in self.edges.items() if not visible & {*v["episode_uuids"]}]:
            del self.edges[edge_uuid]
        hits = [
            {**edge, "score": similarity(query, edge["fact"])}
            for edge in self.edges.values()
            if edge["graph_uuid"] == graph_uuid
            and (cited is None or set(cited) & set(edge["episode_uuids"]))
        ]
        hits.sort(key=lambda hit: hit["score"], reverse=True)
        size = int(request.arg("page_size") or SEARCH_PAGE_SIZE)
        return json_reply(200, {"items": hits[:size], "total_size": len(hits)})

    def _keep(self, episode: dict[str, Any], graph_uuid: str, filters: dict[str, Any]) -> bool:
        if episode["graph_uuid"] != graph_uuid:
            return False
        group = filters.get("metadata_filters")
        return group is None or self._group(group, episode.get("metadata") or {})

    def _group(self, group: Any, metadata: dict[str, Any]) -> bool:
        if not isinstance(group, dict) or group.get("type", "and") not in ("and", "or"):
            raise Abort(self.error(400, "metadata_filters must be a group of type and/or"))
        results = [self._group(sub, metadata) for sub in group.get("groups") or []]
        for condition in group.get("filters") or []:
            operator, name = condition.get("operator"), condition.get("property_name")
            try:
                results.append(compare(operator, metadata.get(name), condition.get("value")))
            except KeyError:
                raise Abort(self.error(400, f"unsupported operator {operator!r}")) from None
        if group.get("type", "and") == "or":
            return any(results) if results else True
        return all(results)

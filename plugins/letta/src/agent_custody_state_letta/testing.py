"""A loopback fake of Letta's agent archival-memory routes, as ``letta-client`` uses them.

Routes (all need ``Authorization: Bearer <api_key>``), modelled on the 0.16 server router:

* ``POST /v1/agents/{agent_id}/archival-memory``: ``{text, tags?, created_at?}``; answers a
  **list** of passages (one here), each ``id`` shaped ``passage-<uuid>``.
* ``GET /v1/agents/{agent_id}/archival-memory``: a plain list; ``search`` is a
  case-insensitive substring match; ``limit``, ``after``, ``before``, ``ascending``.
* ``GET /v1/agents/{agent_id}/archival-memory/search``: ``query`` plus repeated ``tags`` and
  ``tag_match_mode`` (any/all), ``top_k``, ``start_datetime``/``end_datetime``; answers
  ``{count, results: [{id, content, timestamp, tags}]}`` ranked by relevance, like a
  vector search it has no relevance cut-off.
* ``DELETE /v1/agents/{agent_id}/archival-memory/{memory_id}``: 404 for an unknown passage.

The archival routes take the fact text in the query string (``search``, ``query``), so request
targets longer than 8 KiB answer 414, as the nginx (or CDN) in front of a Letta server does.

``fake.chunks = N`` makes an add split its text into N passages (each with the same tags), as a
server that chunks long text would; the SDK's list return type allows it, so adapters must keep
every id.

``fake.store_then_fail = N`` makes the next N adds store their passages and then answer 504, as
a gateway does that timed out while the server wrote: the client cannot tell that it did.
``fake.store_later = N`` makes the next N adds answer 504 *before* their passages are stored, as
a gateway does that gave up while the server was still embedding the text: the server finishes
the insert anyway, when ``fake.finish_adds()`` is called (a client timeout looks the same).

Agents must be registered first (``FakeLetta(agents=[...])`` or ``fake.add_agent()``); an
unknown agent is a 404 and an id not shaped ``agent-<uuid>`` is a 422, as on the server.

Import it as ``from agent_custody_state_letta.testing import FakeLetta``; it needs the fake server
base from ``agent-custody-state-conformance``, which ``agent-custody-state-letta[test]`` installs.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from agent_custody_state_conformance.fakeserver import (
    Abort,
    FakeVendorServer,
    Handler,
    Reply,
    Request,
    fastapi_validation_error,
    iso_now,
    json_reply,
    similarity,
)

__all__ = ["FakeLetta"]

_AGENT_ID = re.compile(r"^agent-[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$")
DEFAULT_LIST_LIMIT = 100
DEFAULT_TOP_K = 10


def _validation_error(location: list[str], message: str) -> Reply:
    return fastapi_validation_error(422, location, message)


def _parse_time(value: str, name: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise Abort(_validation_error(["query", name], "invalid datetime")) from None
    return parsed if parsed.tzinfo else parsed.astimezone()


def _split(text: str, parts: int) -> list[str]:
    """``text`` cut into ``parts`` consecutive non-empty pieces (fewer if it is too short)."""
    parts = max(1, min(parts, len(text) or 1))
    size = -(-len(text) // parts) or 1
    return [text[i : i + size] for i in range(0, len(text), size)] or [text]


class FakeLetta(FakeVendorServer):
    """Fake Letta archival memory. ``with FakeLetta(agents=[agent_id]) as fake: fake.url``.

    Extra views: ``agents`` (agent id -> ``{"id", "archive_id"}``). ``items`` holds passages
    by passage id. Helper: ``add_agent(agent_id=None)`` registers an agent and returns its id.
    """

    vendor = "letta"
    auth_scheme = "Bearer"
    max_request_target = 8 * 1024

    def __init__(self, *, api_key: str | None = "test-key", agents: Iterable[str] = ()) -> None:
        super().__init__(api_key=api_key)
        self.chunks = 1
        self.store_then_fail = 0
        self.store_later = 0
        self._unfinished: list[dict[str, Any]] = []
        self.agents: dict[str, dict[str, str]] = {}
        for agent_id in agents:
            self.add_agent(agent_id)

    def add_agent(self, agent_id: str | None = None) -> str:
        """Register an agent (a fresh ``agent-<uuid>`` when no id is given)."""
        agent_id = agent_id or f"agent-{uuid.uuid4()}"
        with self.lock:
            self.agents[agent_id] = {"id": agent_id, "archive_id": f"archive-{uuid.uuid4()}"}
        return agent_id

    def finish_adds(self) -> None:
        """Store the passages of the adds ``store_later`` answered 504 for (the server caught up)."""
        with self.lock:
            unfinished, self._unfinished = self._unfinished, []
            for passage in unfinished:
                self._store(passage["id"], passage)

    def routes(self) -> Iterable[tuple[str, str, str, Handler]]:
        base = "/v1/agents/{agent_id}/archival-memory"
        return [
            ("POST", base, "add", self._add),
            ("GET", base, "list", self._list),
            ("GET", base + "/search", "search", self._search),
            ("DELETE", base + "/{memory_id}", "delete", self._delete),
        ]

    def error(self, status: int, message: str, code: str | None = None) -> Reply:
        return json_reply(status, {"detail": message})

    def _archive(self, agent_id: str) -> str:
        if not _AGENT_ID.match(agent_id):
            raise Abort(_validation_error(["path", "agent_id"], "must look like 'agent-<uuid4>'"))
        agent = self.agents.get(agent_id)
        if agent is None:
            raise Abort(self.error(404, f"Agent with id {agent_id} not found"))
        return agent["archive_id"]

    def _passages(self, archive_id: str) -> list[dict[str, Any]]:
        return [p for p in self._indexed() if p["archive_id"] == archive_id]

    # -- routes -------------------------------------------------------------------------

    def _add(self, request: Request, params: dict[str, str]) -> Reply:
        archive_id = self._archive(params["agent_id"])
        body = self._body(request)
        text, tags = body.get("text"), body.get("tags")
        if not isinstance(text, str):
            return _validation_error(["body", "text"], "Field required")
        if tags is not None and not (
            isinstance(tags, list) and all(isinstance(t, str) for t in tags)
        ):
            return _validation_error(["body", "tags"], "Input should be a list of strings")
        created = body.get("created_at") or iso_now()
        passages = []
        for chunk in _split(text, self.chunks):
            passage_id = f"passage-{uuid.uuid4()}"
            passage: dict[str, Any] = {
                "id": passage_id, "text": chunk, "tags": list(tags or []),
                "archive_id": archive_id, "created_at": created, "updated_at": created,
                "created_by_id": None, "last_updated_by_id": None, "embedding": None,
                "embedding_config": None, "metadata": {}, "is_deleted": False, "file_id": None,
                "file_name": None, "source_id": None,
            }  # fmt: skip
            passages.append(passage)
        if self.store_later > 0:
            self.store_later -= 1
            self._unfinished += passages
            return self.error(504, "Gateway Timeout")
        for passage in passages:
            self._store(passage["id"], passage)
        if self.store_then_fail > 0:
            self.store_then_fail -= 1
            return self.error(504, "Gateway Timeout")
        return json_reply(200, passages)

    def _list(self, request: Request, params: dict[str, str]) -> Reply:
        rows = self._passages(self._archive(params["agent_id"]))
        needle = (request.arg("search") or "").lower()
        if needle:
            rows = [p for p in rows if needle in p["text"].lower()]
        if (request.arg("ascending") or "true").lower() == "false":
            rows.reverse()
        ids = [p["id"] for p in rows]
        if request.arg("after") in ids:
            rows = rows[ids.index(request.arg("after")) + 1 :]
        if request.arg("before") in ids:
            rows = rows[: [p["id"] for p in rows].index(request.arg("before"))]
        limit = int(request.arg("limit") or DEFAULT_LIST_LIMIT)
        return json_reply(200, rows[:limit])

    def _search(self, request: Request, params: dict[str, str]) -> Reply:
        rows = self._passages(self._archive(params["agent_id"]))
        query = request.arg("query")
        if query is None:
            return _validation_error(["query", "query"], "Field required")
        tags = set(request.query.get("tags", []))
        mode = request.arg("tag_match_mode", "any")
        if mode not in ("any", "all"):
            return _validation_error(["query", "tag_match_mode"], "must be 'any' or 'all'")
        if tags:
            wanted = tags.issubset if mode == "all" else tags.intersection
            rows = [p for p in rows if wanted(p["tags"])]
        if request.arg("start_datetime"):
            start = _parse_time(request.arg("start_datetime") or "", "start_datetime")
            rows = [p for p in rows if _parse_time(p["created_at"], "created_at") >= start]
        if request.arg("end_datetime"):
            end = _parse_time(request.arg("end_datetime") or "", "end_datetime")
            rows = [p for p in rows if _parse_time(p["created_at"], "created_at") <= end]
        ranked = sorted(rows, key=lambda p: similarity(query, p["text"]), reverse=True)
        top_k = int(request.arg("top_k") or DEFAULT_TOP_K)
        results = [
            {"id": p["id"], "content": p["text"], "tags": p["tags"],
             "timestamp": _parse_time(p["created_at"], "created_at").strftime(
                 "%Y-%m-%d %I:%M:%S %p %Z%z")}
            for p in ranked[:top_k]
        ]  # fmt: skip
        return json_reply(200, {"count": len(results), "results": results})

    def _delete(self, request: Request, params: dict[str, str]) -> Reply:
        archive_id = self._archive(params["agent_id"])
        passage = self.items.get(params["memory_id"])
        if passage is None or passage["archive_id"] != archive_id:
            return self.error(404, f"Passage with id {params['memory_id']} not found")
        self._remove(params["memory_id"])
        return json_reply(200, {"message": f"Memory id={params['memory_id']} successfully deleted"})

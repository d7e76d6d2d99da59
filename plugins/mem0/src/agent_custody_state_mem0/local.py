"""The open-source mem0 ``Memory``, running in this process (vector store + embedder).

Writes use ``infer=False``, so no LLM is ever called; mem0 still builds one at startup, so a
placeholder is configured when the settings name none. Calls are serialised: the embedded
vector stores (qdrant's local mode in particular) are not safe across threads.

``Memory`` keeps a history of every memory in its SQLite ``history_db_path``, and its ``delete``
*adds* a row holding the deleted text (``old_memory``): the value would outlive the forget on
disk. ``delete`` therefore also removes the memory's history rows, with SQLite's
``secure_delete`` on so the freed pages are zeroed, and ``residue`` reports rows still there.
"""

from __future__ import annotations

import threading
from typing import Any

from agent_custody_state.plugin import resolve_ref, secret_from_env

from .backend import Added, EventState, Record, first_id
from .sdk import import_mem0
from .settings import Mem0Settings

_QUERY_CHARS = 1000
_LIMIT = 100
# Never contacted (infer=False), but mem0 constructs its LLM client eagerly and the default
# OpenAI one refuses to exist without a key. A dead loopback port makes any surprise call fail
# fast instead of reaching the internet.
PLACEHOLDER_LLM = {
    "provider": "openai",
    "config": {"api_key": "unused-infer-false", "openai_base_url": "http://127.0.0.1:9/v1"},
}


def _copy(value: Any) -> Any:
    # Plain containers are copied; objects (an embeddings model) are shared, not deep-copied.
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _place(config: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = config
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ValueError(f"local config path {dotted}: {part} is not a table")
        node = child
    node[leaf] = value


def local_config(settings: Mem0Settings, store: str) -> dict[str, Any]:
    """The ``Memory.from_config`` dict: the settings' table plus secrets and objects."""
    config: dict[str, Any] = _copy(settings.local_config or {})
    for dotted, variable in settings.local_env.items():
        _place(config, dotted, secret_from_env(store, variable, what=f"value of {dotted}"))
    for dotted, ref in settings.local_objects.items():
        _place(config, dotted, resolve_ref(ref)())
    config.setdefault("llm", _copy(PLACEHOLDER_LLM))
    return config


class LocalBackend:
    """``Mem0Backend`` over an in-process ``mem0.Memory``."""

    def __init__(self, settings: Mem0Settings, store: str) -> None:
        mem0 = import_mem0(settings)
        self._memory = mem0.Memory.from_config(local_config(settings, store))
        self._lock = threading.Lock()
        self._history("PRAGMA secure_delete=ON")
        self._scope = {"user_id": settings.user_id}
        if settings.agent_id:
            self._scope["agent_id"] = settings.agent_id

    def add(self, text: str, metadata: dict[str, Any]) -> Added:
        with self._lock:
            reply = self._memory.add(
                [{"role": "user", "content": text}], metadata=metadata, infer=False, **self._scope
            )
        memory_id = first_id(reply.get("results"))
        if not memory_id:
            raise RuntimeError(f"add returned no memory id: {reply!r:.200}")
        return Added(memory_id=memory_id)

    def event(self, event_id: str) -> EventState:
        raise RuntimeError("the local Memory has no asynchronous adds")

    def get(self, memory_id: str) -> Record | None:
        with self._lock:
            record = self._memory.get(memory_id)
        return record if isinstance(record, dict) else None

    def _history(self, statement: str, *params: Any) -> list[Any]:
        """Run one statement on ``Memory``'s history database, under its own lock."""
        db = getattr(self._memory, "db", None)
        if db is None:  # no history kept
            return []
        with db._lock:
            rows: list[Any] = db.connection.execute(statement, params).fetchall()
            db.connection.commit()
        return rows

    def delete(self, memory_id: str) -> None:
        with self._lock:
            # Memory.delete raises a bare ValueError for an unknown id; look first instead.
            if self._memory.get(memory_id) is not None:
                self._memory.delete(memory_id)
            # Also when already gone: a delete interrupted before this left the text here.
            self._history("DELETE FROM history WHERE memory_id = ?", memory_id)

    def residue(self, memory_id: str) -> bool:
        with self._lock:
            rows = self._history(
                "SELECT 1 FROM history WHERE memory_id = ? AND "
                "(old_memory IS NOT NULL OR new_memory IS NOT NULL) LIMIT 1",
                memory_id,
            )
        return bool(rows)

    def by_fact(self, fact_id: str) -> list[Record]:
        # Local filters take metadata keys at the top level, beside the entity ids.
        with self._lock:
            reply = self._memory.get_all(filters={**self._scope, "factId": fact_id}, top_k=_LIMIT)
        return list(reply.get("results") or [])

    def search(self, text: str) -> list[Record]:
        with self._lock:
            reply = self._memory.search(
                text[:_QUERY_CHARS], filters=dict(self._scope), threshold=0.0, top_k=_LIMIT
            )
        return list(reply.get("results") or [])

    def close(self) -> None:
        with self._lock:
            self._memory.close()
            client = getattr(getattr(self._memory, "vector_store", None), "client", None)
            if client is not None and hasattr(client, "close"):
                client.close()  # releases qdrant's lock on its local directory

"""The LangGraph store: one ``BaseStore`` item per fact, keyed by the fact id (SPEC 6).

LangMem keeps an agent's memories as items in a namespace such as ``("memories", <user>)``,
with the text under ``content``. Writing facts there, in the same shape, puts them where a
LangGraph agent already searches, under custody::

    namespace: ("memories", "{space}")  -- or any configured labels
    key:       <factId>
    value:     {"content": "<subject> <predicate>: <value>", "subject", "predicate", "value",
                "factId", "space", "actor", "provenance", "receiptId", "validFrom", "source"}

A value some backend cannot hold as JSON (U+0000, a lone surrogate, nesting past
``MAX_ITEM_DEPTH``) is stored as its JSON text with ``"valueJson": true`` (``stored_value``).

Removal is ``delete`` (idempotent in every BaseStore). ``held_ids`` (the copies a failed put
may have left) reads the key and searches the fact's namespace by the ``factId`` filter.
Verification asks twice, as every adapter should: ``get`` by key is None, and a ``search`` of
*every* namespace filtered by ``factId`` (plus a vector search for the content when an index is
configured) returns neither the key nor any item of the fact: an item written under an earlier
``namespace`` setting is not where the fact's namespace is now, but it is the fact all the same
(reported, not removed, like a copy under another key).

Works with any BaseStore; :func:`build` opens LangGraph's own InMemoryStore, SqliteStore or
PostgresStore from the settings. The sync API runs in worker threads (``storekit.call_sdk``): the
SQLite store guards its connection with a lock of its own; the PostgreSQL store gets a small pool
that checks each connection before use and bounds every statement (``postgres``).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote

from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from agent_custody_state.plugin import (
    Fact,
    StoreError,
    call_sdk,
    custody_metadata,
    embedding_provider,
    fact_text,
    postgres_table,
    process_memory,
    resolve_ref,
    secret_from_env,
    sqlite_file,
)

from .settings import LangGraphSettings

DEFAULT_NAMESPACE = ("memories", "{space}")


#: Deepest value an item holds as it is: LangGraph's SQLite and PostgreSQL stores write and read
#: items with orjson, which refuses nesting past 254 levels (the item adds one); the ledger takes
#: 256.
MAX_ITEM_DEPTH = 200
_UNHOLDABLE = re.compile("[\x00\ud800-\udfff]")


def holds_as_is(value: Any) -> bool:
    """Whether every LangGraph backend holds ``value`` as JSON: no string or key with U+0000
    (PostgreSQL's ``jsonb`` refuses it) or a lone surrogate (orjson and UTF-8 refuse it), and
    nested at most ``MAX_ITEM_DEPTH`` levels."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if _UNHOLDABLE.search(item):
                return False
        elif isinstance(item, dict | list):
            if depth >= MAX_ITEM_DEPTH:
                return False
            members = list(item.items()) if isinstance(item, dict) else [(None, v) for v in item]
            for key, member in members:
                if isinstance(key, str) and _UNHOLDABLE.search(key):
                    return False
                stack.append((member, depth + 1))
    return True


def item_value(fact: Fact) -> dict[str, Any]:
    """The item stored for a fact: LangMem's ``content`` plus the fields and custody.

    A value no backend can hold as it is (``holds_as_is``) is stored as its JSON text (ASCII,
    every such character escaped), with ``"valueJson": true`` beside it: ``json.loads`` gives
    the value back (``stored_value``)."""
    item = {
        "content": fact_text(fact),
        "subject": fact.subject,
        "predicate": fact.predicate,
        "value": fact.value,
        **custody_metadata(fact),
    }
    if not holds_as_is(fact.value):
        item.update(value=json.dumps(fact.value, separators=(",", ":")), valueJson=True)
    return item


def stored_value(item: dict[str, Any]) -> Any:
    """The fact's value from an item ``item_value`` made."""
    value = item.get("value")
    if item.get("valueJson") is True and isinstance(value, str):
        return json.loads(value)
    return value


class LangGraphStore:
    """A ``Store`` over any LangGraph ``BaseStore``."""

    def __init__(
        self,
        name: str,
        base: BaseStore,
        *,
        namespace: Sequence[str] = DEFAULT_NAMESPACE,
        indexed: bool = False,
        top_k: int = 10,
        on_close: Callable[[], None] | None = None,
        where: str | None = None,
        residual: list[dict[str, str]] | None = None,
    ) -> None:
        self.name = name
        #: where the items go (``Store.where``; ``place``); None: not declared
        self.where = where
        #: where a removed item may remain (``Store.residual``; ``leftovers``)
        self.residual = residual
        self.base = base
        self.namespace_template = tuple(namespace)
        self.indexed = indexed
        self.top_k = top_k
        self._on_close = on_close

    def _labels(self, fact: Fact) -> tuple[str, ...]:
        return tuple(label.replace("{space}", fact.space) for label in self.namespace_template)

    def refusal(self, fact: Fact) -> str | None:
        """Why LangGraph refuses the fact's namespace (``Store.refusal``): a label that is empty
        or holds "." or U+0000, or the reserved root "langgraph" (its ``_validate_namespace``),
        as a space such as ``acme.com`` gives under ``{space}``; None when it takes it. Asked
        before any store is written; ``put`` (and every call here) refuses the same."""
        labels = self._labels(fact)
        bad = [label for label in labels if not label or "." in label or "\x00" in label]
        if bad:
            return (
                f'namespace label "{bad[0]}" (from space '
                f'"{fact.space}") is empty or contains "." or U+0000; LangGraph refuses it'
            )
        if labels[0] == "langgraph":
            return (
                f'namespace root "langgraph" (from space "{fact.space}") is reserved by '
                "LangGraph; LangGraph refuses it"
            )
        return None

    def namespace_for(self, fact: Fact) -> tuple[str, ...]:
        """The configured labels with ``{space}`` filled in from the fact; ``StoreError`` when
        LangGraph refuses them (``refusal``)."""
        problem = self.refusal(fact)
        if problem is not None:
            raise StoreError(self.name, problem)
        return self._labels(fact)

    def _elsewhere(self, fact: Fact) -> list[Any]:
        """Items of the fact in *every* namespace: one written under an earlier ``namespace``
        setting is not where ``namespace_for`` looks now, but it is the fact all the same."""
        return self.base.search((), filter={"factId": fact.fact_id}, limit=self.top_k)

    def _verify_removed(self, namespace: tuple[str, ...], key: str, fact: Fact) -> bool:
        if self.base.get(namespace, key) is not None:
            return False
        hits = self._elsewhere(fact)
        if self.indexed:
            hits += self.base.search(namespace, query=fact_text(fact), limit=self.top_k)
        # A hit under another key that carries the fact id is the fact too.
        return all(hit.key != key and hit.value.get("factId") != fact.fact_id for hit in hits)

    def _held_ids(self, namespace: tuple[str, ...], fact: Fact) -> list[str]:
        keys = [fact.fact_id] if self.base.get(namespace, fact.fact_id) is not None else []
        # Only this namespace's items: ``remove`` deletes by key in it, not in a sub-namespace.
        hits = self.base.search(namespace, filter={"factId": fact.fact_id}, limit=self.top_k)
        keys += [hit.key for hit in hits if tuple(hit.namespace) == namespace]
        return list(dict.fromkeys(keys))

    async def held_ids(self, fact: Fact) -> list[str]:
        namespace = self.namespace_for(fact)
        return await call_sdk(self.name, "look up by fact id", self._held_ids, namespace, fact)

    async def put(self, fact: Fact) -> str:
        namespace = self.namespace_for(fact)
        await call_sdk(self.name, "put", self.base.put, namespace, fact.fact_id, item_value(fact))
        return fact.fact_id

    async def remove(self, external_id: str, fact: Fact) -> None:
        namespace = self.namespace_for(fact)
        await call_sdk(self.name, "remove", self.base.delete, namespace, external_id)

    async def verify_removed(self, external_id: str, fact: Fact) -> bool:
        namespace = self.namespace_for(fact)
        return await call_sdk(
            self.name, "verify", self._verify_removed, namespace, external_id, fact
        )

    def close(self) -> None:
        if self._on_close is not None:
            self._on_close()
            self._on_close = None


def _index(settings: LangGraphSettings, name: str) -> dict[str, Any] | None:
    if settings.index_embed is None:
        return None
    try:
        embed = resolve_ref(settings.index_embed)
    except (ImportError, AttributeError) as exc:
        raise StoreError(
            name, f"index_embed {settings.index_embed!r} cannot be imported: {exc}"
        ) from exc
    return {"dims": settings.index_dimensions, "embed": embed, "fields": ["content"]}


def _drop_orphan_vectors(conn: sqlite3.Connection) -> None:
    """Delete the embeddings whose item is gone: left by deletes made with foreign keys off
    (before this adapter turned them on, or by another program)."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'store_vectors'").fetchone():
        conn.execute(
            "DELETE FROM store_vectors WHERE NOT EXISTS (SELECT 1 FROM store "
            "WHERE store.prefix = store_vectors.prefix AND store.key = store_vectors.key)"
        )


def open_backend(settings: LangGraphSettings, name: str) -> tuple[BaseStore, Callable[[], None]]:
    """LangGraph's own store for ``settings.backend``, set up, with a function that closes it."""
    index = _index(settings, name)
    if settings.backend == "memory":
        return InMemoryStore(index=index), lambda: None  # type: ignore[arg-type]
    try:
        if settings.backend == "sqlite":
            from langgraph.store.sqlite import SqliteStore

            assert settings.path is not None
            # The form SqliteStore.from_conn_string uses: autocommit, usable from any thread
            # (the store serialises access with its own lock).
            conn = sqlite3.connect(settings.path, check_same_thread=False, isolation_level=None)
            # A removed fact's bytes must not stay in the file's free space; secure_delete's
            # default depends on how the SQLite library was built (SQLite's own default is off).
            conn.execute("PRAGMA secure_delete=ON")
            # An item's embeddings (``store_vectors``, a derived form of the value) go with it
            # only by ``ON DELETE CASCADE``, which SQLite enforces only with foreign keys on;
            # LangGraph's own connections leave them off, so a delete kept the vectors.
            conn.execute("PRAGMA foreign_keys=ON")
            sqlite_store = SqliteStore(conn, index=index)  # type: ignore[arg-type]
            sqlite_store.setup()
            _drop_orphan_vectors(conn)
            return sqlite_store, conn.close
        from .postgres import open_postgres

        return open_postgres(settings, name, index)
    except StoreError:
        raise
    except ImportError as exc:
        raise StoreError(
            name,
            f'backend "{settings.backend}" needs {exc.name}: pip install '
            f"'agent-custody-state-langgraph[{settings.backend}]'",
        ) from exc
    except Exception as exc:
        raise StoreError(
            name, f"cannot open the {settings.backend} store: {type(exc).__name__}: {exc}"
        ) from exc


def place(settings: LangGraphSettings, dsn: str | None = None) -> str:
    """Where the items go (``Store.where``): the backend (the SQLite file; the PostgreSQL
    server and database, without user, password or options) and the namespace template.
    No secret, no connection."""
    if settings.backend == "sqlite":
        backend = f"sqlite:{os.path.abspath(str(settings.path))}"
    elif settings.backend == "postgres":
        from psycopg.conninfo import conninfo_to_dict

        params = conninfo_to_dict(dsn or "")
        host = str(params.get("host") or params.get("hostaddr") or "localhost")
        database = params.get("dbname") or params.get("user") or ""
        backend = f"postgresql://{quote(host, safe='[]:.')}:{params.get('port') or 5432}/{database}"
    else:
        backend = "memory"  # this process's InMemoryStore
    return f"{backend} namespace:{'/'.join(settings.namespace)}"


def leftovers(settings: LangGraphSettings) -> list[dict[str, str]]:
    """Where a removed item may remain (``Store.residual``), by backend."""
    if settings.backend == "sqlite":
        windows = sqlite_file(os.path.abspath(str(settings.path)))
    elif settings.backend == "postgres":
        windows = postgres_table("LangGraph's store and store_vectors tables")
    else:
        windows = [process_memory()]
    if settings.index_embed is not None:
        windows.append(embedding_provider("the index's embedding model (if remote)"))
    return windows


def build(settings: LangGraphSettings, *, name: str) -> LangGraphStore:
    """The registered factory: open the configured BaseStore and wrap it."""
    base, close = open_backend(settings, name)
    dsn = secret_from_env(name, settings.dsn_env, what="PostgreSQL URL")
    return LangGraphStore(
        name,
        base,
        namespace=settings.namespace,
        indexed=settings.index_embed is not None,
        top_k=settings.top_k,
        on_close=close,
        where=place(settings, dsn),
        residual=leftovers(settings),
    )

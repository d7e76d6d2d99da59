"""End-to-end helpers: a memory server config on disk, and what each store really holds.

An end-to-end test serves a config with ``agent-custody-memory serve --config`` (over stdio,
through :class:`~agent_custody_state_conformance.gateway.GatewayClient`), drives the tools, and
then looks *behind* the adapters: the vendor fakes' state, the pgvector table, the LangGraph
store's own database. This module holds the parts such tests share::

    config = write_config(tmp_path, stores=[{"name": "vectors", "type": "pgvector", ...}])
    async with GatewayClient.stdio("serve", "--config", str(config), env=...) as gw:
        ...
        assert pgvector_held(url, "custody_facts") == {Held(fact_id, text, receipt, fact_id)}
        assert residue(fake_mem0, "the forgotten value") == []

Every backdoor reader answers a set of :class:`Held` records in one shape (the fact the store
says it holds, the text it holds, the receipt in its custody metadata, and the store's own id for
it), so a test can compare all stores against what the ledger believes now in one assertion.

Used by ``tests/e2e`` and ``tests/reliability/test_erasure.py`` (as ``e2e.endtoend``); it is this
repository's own test code, so it is not shipped in the conformance wheel.
"""

from __future__ import annotations

import json
import sqlite3
import tomllib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "Held",
    "cognee_held",
    "langgraph_held",
    "letta_held",
    "mem0_held",
    "pgvector_held",
    "postgres_residue",
    "render_config",
    "residue",
    "sqlite_residue",
    "write_config",
    "zep_held",
]

# State on a fake that is not "stored by the vendor": the wire log, the server machinery.
_NOT_STORED = frozenset({"requests", "lock", "_server", "_thread", "_routes", "api_key", "token"})


@dataclass(frozen=True, order=True)
class Held:
    """One record a store holds: the fact it belongs to, its text, its receipt, its store id."""

    fact_id: str | None
    text: str
    receipt_id: str | None
    key: str


# -- config -------------------------------------------------------------------------------


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str | Path):
        # A JSON string is a valid TOML basic string (same escapes).
        return json.dumps(str(value), ensure_ascii=False)
    if isinstance(value, Sequence):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        inner = ", ".join(f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    raise TypeError(f"cannot write {type(value).__name__} to TOML: {value!r}")


def _toml_table(values: Mapping[str, Any]) -> list[str]:
    return [f"{json.dumps(key)} = {_toml_value(value)}" for key, value in values.items()]


def render_config(
    *,
    ledger: str | Path,
    stores: Sequence[Mapping[str, Any]] = (),
    verify: Mapping[str, Any] | None = None,
    **top: Any,
) -> str:
    """The TOML text of a memory server config (``docs/configuration.md``).

    ``top`` holds further top-level keys (``forget_key_env``, ``retention``...) and tables
    (``server={...}``); each ``stores`` entry becomes one ``[[stores]]`` table. The text is
    parsed back before it is returned, so a value TOML cannot express fails here, not in the
    server."""
    scalars = {k: v for k, v in top.items() if not isinstance(v, Mapping)}
    tables = {k: v for k, v in top.items() if isinstance(v, Mapping)}
    if verify is not None:
        tables["verify"] = verify
    lines = _toml_table({"ledger": ledger, **scalars})
    for name, table in tables.items():
        lines += ["", f"[{name}]", *_toml_table(table)]
    for store in stores:
        lines += ["", "[[stores]]", *_toml_table(store)]
    text = "\n".join(lines) + "\n"
    parsed = tomllib.loads(text)
    if len(parsed.get("stores", [])) != len(stores):
        raise AssertionError(f"config did not round-trip:\n{text}")
    return text


def write_config(
    folder: Path,
    *,
    stores: Sequence[Mapping[str, Any]] = (),
    ledger: str | Path | None = None,
    verify: Mapping[str, Any] | None = None,
    name: str = "memory.toml",
    **top: Any,
) -> Path:
    """Write ``render_config(...)`` to ``folder/name``; the ledger defaults to
    ``folder/ledger.jsonl``. Returns the config's path."""
    path = folder / name
    path.write_text(
        render_config(
            ledger=ledger or folder / "ledger.jsonl", stores=stores, verify=verify, **top
        ),
        encoding="utf-8",
    )
    return path


# -- backdoors: what each store holds --------------------------------------------------------


def _text_of(subject: Any, predicate: Any, value: Any) -> str:
    shown = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return f"{subject} {predicate}: {shown}"


def mem0_held(fake: Any) -> set[Held]:
    """A ``FakeMem0``'s memories: the memory text, ``metadata.factId`` / ``receiptId``."""
    with fake.lock:
        records = list(fake.items.values())
    held = set()
    for record in records:
        meta = record.get("metadata") or {}
        held.add(Held(meta.get("factId"), record["memory"], meta.get("receiptId"), record["id"]))
    return held


def zep_held(fake: Any) -> set[Held]:
    """A ``FakeZep``'s episodes (JSON data): text rebuilt from subject/predicate/value."""
    with fake.lock:
        episodes = list(fake.items.values())
    held = set()
    for episode in episodes:
        data = json.loads(episode["content"])
        meta = episode.get("metadata") or {}
        text = _text_of(data.get("subject"), data.get("predicate"), data.get("value"))
        held.add(Held(meta.get("factId"), text, meta.get("receiptId"), episode["uuid"]))
    return held


def _tag(tags: Iterable[str], prefix: str) -> str | None:
    found = [t[len(prefix) :] for t in tags if t.startswith(prefix)]
    return found[0] if len(found) == 1 else None


def letta_held(fake: Any) -> set[Held]:
    """A ``FakeLetta``'s passages: the text, the ``fact:`` and ``receipt:`` custody tags."""
    with fake.lock:
        passages = list(fake.items.values())
    return {
        Held(_tag(p["tags"], "fact:"), p["text"], _tag(p["tags"], "receipt:"), p["id"])
        for p in passages
    }


def cognee_held(fake: Any) -> set[Held]:
    """A ``FakeCognee``'s data items: the ingested bytes less the adapter's per-fact marker
    (kept when it names another fact), ``externalMetadata``; key ``<dataset>/<data id>``."""
    with fake.lock:
        items = [(item, fake.raw_data.get(item["id"], b"")) for item in fake.items.values()]
    held = set()
    for item, raw in items:
        meta = item.get("externalMetadata") or {}
        text = raw.decode("utf-8", errors="replace")
        marker = f"\n\n[agent-custody fact:{meta.get('factId')}]"
        if text.endswith(marker):
            text = text[: -len(marker)]
        key = f"{item['datasetId']}/{item['id']}"
        held.add(Held(meta.get("factId"), text, meta.get("receiptId"), key))
    return held


def pgvector_held(url: str, table: str) -> set[Held]:
    """Rows of a pgvector store's table, read with SQL (``psycopg`` needed)."""
    import psycopg
    from psycopg import sql

    query = sql.SQL("SELECT id, text, metadata FROM {}").format(sql.Identifier(table))
    with psycopg.connect(url) as conn:
        rows = conn.execute(query).fetchall()
    return {
        Held(meta.get("factId"), text, meta.get("receiptId"), row_id) for row_id, text, meta in rows
    }


def langgraph_held(store: Any, prefix: Sequence[str] = ("memories",)) -> set[Held]:
    """Items of a LangGraph ``BaseStore`` under ``prefix`` (read with the store's own API)."""
    held = set()
    offset = 0
    while True:
        page = store.search(tuple(prefix), limit=100, offset=offset)
        for item in page:
            value = item.value
            held.add(
                Held(value.get("factId"), value.get("content"), value.get("receiptId"), item.key)
            )
        if len(page) < 100:
            return held
        offset += len(page)


# -- residue: any trace of a value ------------------------------------------------------------


def _walk(obj: Any, path: str, seen: set[int]) -> Iterator[tuple[str, str]]:
    """``(path, text)`` for every string (or bytes) reachable from ``obj``."""
    if isinstance(obj, str):
        yield path, obj
        return
    if isinstance(obj, bytes | bytearray):
        yield path, bytes(obj).decode("utf-8", errors="replace")
        return
    if obj is None or isinstance(obj, bool | int | float) or id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, Mapping):
        for key, value in list(obj.items()):
            yield from _walk(key, f"{path}<key>", seen)
            yield from _walk(value, f"{path}[{key!r}]", seen)
    elif isinstance(obj, list | tuple | set | frozenset):
        for index, value in enumerate(list(obj)):
            yield from _walk(value, f"{path}[{index}]", seen)
    elif is_dataclass(obj) and not isinstance(obj, type):
        for field in fields(obj):
            yield from _walk(getattr(obj, field.name), f"{path}.{field.name}", seen)
    elif callable(obj):
        # Deferred work (a fake's pending task) keeps what it will store in its closure.
        for index, cell in enumerate(getattr(obj, "__closure__", None) or ()):
            try:
                contents = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            yield from _walk(contents, f"{path}<closure {index}>", seen)


def residue(fake: Any, needle: str) -> list[str]:
    """Where ``needle`` still occurs in a vendor fake's stored state: every attribute (items,
    lagging ghosts, edges, raw uploads, pending work, events...) but the wire log
    ``requests``. Answers the attribute paths; ``[]`` means no trace."""
    with fake.lock:
        state = {k: v for k, v in vars(fake).items() if k not in _NOT_STORED}
        return sorted(
            {path for path, text in _walk(state, type(fake).__name__, set()) if needle in text}
        )


def sqlite_residue(path: Path, needle: str) -> list[str]:
    """Tables of a SQLite database with a row that contains ``needle`` (any column, as text)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        found = []
        for table in tables:
            quoted = '"' + table.replace('"', '""') + '"'
            for row in conn.execute(f"SELECT * FROM {quoted}"):  # table names from the db itself
                if any(needle in _as_text(cell) for cell in row):
                    found.append(table)
                    break
        return found
    finally:
        conn.close()


def _as_text(cell: Any) -> str:
    if isinstance(cell, bytes):
        return cell.decode("utf-8", errors="replace")
    return str(cell)


def postgres_residue(url: str, needle: str, tables: Sequence[str]) -> list[str]:
    """Those of ``tables`` with a row whose text form contains ``needle``."""
    import psycopg
    from psycopg import sql

    found = []
    with psycopg.connect(url) as conn:
        for table in tables:
            query = sql.SQL("SELECT count(*) FROM {} AS t WHERE strpos(t::text, %s) > 0").format(
                sql.Identifier(table)
            )
            row = conn.execute(query, (needle,)).fetchone()
            if row is not None and row[0]:
                found.append(table)
    return found

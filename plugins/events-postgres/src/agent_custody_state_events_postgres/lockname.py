"""The name a PostgreSQL ledger's advisory locks are keyed on: its table as the server resolves it.

The write key, the order lock and the key locks of a write section (``store``) are hashes of a
name. Hashed from the ``?table=`` text, two replicas naming one table differently (``events``
and ``public.events``; or ``events`` found by a ``search_path`` and ``app.events``) took
different locks for it and excluded nothing: two supersessions of one fact both won, and two
appends extended the same chain head. The name is therefore the table the server finds, in the
form the default location always had: ``<table>`` in the schema ``public``, else
``<schema>.<table>`` (docs/decisions.md, "One table, one set of locks").
"""

from __future__ import annotations

import hashlib
from typing import Any

#: The transaction-scoped advisory lock, named in ``pg_catalog``: a function of the name in a
#: schema earlier on the ``search_path`` is never run in its place (so for every built-in the
#: plugin's SQL calls, but the multi-argument ``unnest`` of a ``FROM``, which PostgreSQL expands
#: to ``pg_catalog.unnest`` itself).
XACT_LOCK = "pg_catalog.pg_advisory_xact_lock"

_RESOLVE = (
    "SELECT n.nspname, c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.oid = pg_catalog.to_regclass(%s)"
)


def resolve(raw: Any, quoted: str) -> tuple[str, str] | None:
    """The schema and name of the table ``quoted`` (its quoted, possibly qualified name) as the
    server finds it on the driver connection ``raw`` (along its ``search_path``); None if not."""
    row = raw.execute(_RESOLVE, (quoted,)).fetchone()
    return None if row is None else (str(row[0]), str(row[1]))


def lock_name(raw: Any, quoted: str, written: str) -> str:
    """The name for the table ``quoted`` on the driver connection ``raw`` (``resolve``);
    ``written`` (the ``?table=`` text) if the server does not find it."""
    found = resolve(raw, quoted)
    if found is None:
        return written
    schema, table = found
    return table if schema == "public" else f"{schema}.{table}"


def advisory_key(name: str, *parts: str) -> int:
    """A signed 64-bit advisory lock key for the table ``name`` and ``parts``."""
    text = "\0".join(("agent-custody-state:" + name, *parts))
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)

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

_RESOLVE = (
    "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.oid = to_regclass(%s)"
)


def lock_name(raw: Any, quoted: str, written: str) -> str:
    """The name for the table ``quoted`` (its quoted, possibly qualified name) on the driver
    connection ``raw``; ``written`` (the ``?table=`` text) if the server does not find it."""
    row = raw.execute(_RESOLVE, (quoted,)).fetchone()
    if row is None:
        return written
    schema, table = str(row[0]), str(row[1])
    return table if schema == "public" else f"{schema}.{table}"


def advisory_key(name: str, *parts: str) -> int:
    """A signed 64-bit advisory lock key for the table ``name`` and ``parts``."""
    text = "\0".join(("agent-custody-state:" + name, *parts))
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)

"""What a PostgreSQL ledger's open asks the server's catalog about its events table and role.

Each answer is about the table the server finds for the location's (possibly unqualified) name,
along the connection's ``search_path``: never a name looked up again on its own, which could be
another schema's table (``lockname.resolve`` gives its schema, where the side tables go).
"""

from __future__ import annotations

import logging
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

__all__ = ["FLUSH_GRANTED", "flush_granted", "json_is_jsonb", "qualify_dialect"]

log = logging.getLogger(__name__)

#: Whether this role may run the durability wait's function (``store.FLUSH``): the text
#: variant, 3 arguments before PostgreSQL 17, 4 (flush) since.
FLUSH_GRANTED = (
    "SELECT coalesce(pg_catalog.bool_or(pg_catalog.has_function_privilege(oid, 'EXECUTE')), "
    "false) FROM pg_catalog.pg_proc "
    "WHERE proname = 'pg_logical_emit_message' AND pronamespace = 'pg_catalog'::regnamespace "
    "AND proargtypes[2] = 'text'::regtype"
)

_JSONB = sa.text(
    "SELECT atttypid = 'jsonb'::regtype FROM pg_catalog.pg_attribute "
    "WHERE attrelid = pg_catalog.to_regclass(:table) AND attname = 'json'"
)


def qualify_dialect(engine: sa.Engine) -> None:
    """SQLAlchemy's first connection of ``engine`` asks ``select current_schema()`` (its
    dialect's default schema), the function by its bare name: a function of the name in a
    schema earlier on the ``search_path`` ran instead. Asked of ``pg_catalog``'s."""
    engine.dialect._get_default_schema_name = _default_schema  # type: ignore[method-assign,assignment]


def _default_schema(conn: Connection) -> str:
    return str(conn.exec_driver_sql("SELECT pg_catalog.current_schema()").scalar())


def json_is_jsonb(conn: Connection, quoted: str) -> bool:
    """Whether the ``json`` column of the table ``quoted`` is ``jsonb`` (older writers)."""
    row: Any = conn.execute(_JSONB, {"table": quoted}).first()
    return row is not None and bool(row[0])


def flush_granted(raw: Any, location: str) -> bool:
    """Whether this role may run ``store.FLUSH``; if not (an operator revoked it), sections
    commit synchronously: a flush refused after the commit would leave the write unconfirmed."""
    row = raw.execute(FLUSH_GRANTED).fetchone()
    if row is not None and row[0]:
        return True
    log.warning(
        "%s: pg_logical_emit_message is not granted to this role; write sections commit "
        "synchronously (one WAL flush per write under the order lock)",
        location,
    )
    return False

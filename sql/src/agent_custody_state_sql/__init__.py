"""The shared SQL base of the SQL event backends: the events table and ``SqlEventBackend``.

Dialect plugins subclass :class:`SqlEventBackend` and use the table helpers of :mod:`.schema`;
this distribution is the one place that depends on SQLAlchemy, so the core installs without it.
The modules: ``schema`` (table, DDL, rows), ``connection`` (connection and write section),
``migration`` (create or migrate the table), ``queries`` (compiled statements), ``decoding``
(rows to events), ``readonly`` (a read-only open) and ``backend`` (the ``EventBackend``
methods).
"""

from __future__ import annotations

from agent_custody_state_sql.backend import SqlEventBackend
from agent_custody_state_sql.schema import (
    TABLE_NAME,
    Prepared,
    create_ddl,
    event_row,
    events_table,
)

__all__ = ["TABLE_NAME", "Prepared", "SqlEventBackend", "create_ddl", "event_row", "events_table"]

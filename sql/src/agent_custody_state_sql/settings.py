"""A SQL ledger's settings: a table ``<events table>_settings`` (name, value) beside its events.

It holds the forget-mode mark (``agent_custody_state.ledger.modemark``): a crypto-shred opener
records the mode there, every later opener reads it, and one in plain mode refuses to write
values. The TypeScript original reads only the events table, so this table changes nothing for
it. Like the checkpoints' table it is created by the first write to it, inside the backend's
write section, and a plain ledger has none.

Reading the mark is a query, a round trip on PostgreSQL, and it is asked before every write in
plain mode; so a mark once seen is kept for the life of the backend (a ledger does not leave
crypto-shred mode), and "no mark" is read again at most every ``RECHECK`` seconds. A plain-mode
process that was already open when another first opened the ledger in crypto-shred mode sees
the mark within that time.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import sqlalchemy as sa

from agent_custody_state.plugin import ModeMark
from agent_custody_state_sql.schema import Prepared, SideTable

if TYPE_CHECKING:
    from agent_custody_state_sql.backend import SqlEventBackend

#: Seconds a "no mark" answer is trusted before the table is read again.
RECHECK = 1.0
_MARK = "forget_mode"


class SqlSettings(SideTable):
    """The settings table of ``backend``; ``mark()`` and ``record()`` of the forget mode."""

    _backend: SqlEventBackend

    def __init__(self, backend: SqlEventBackend) -> None:
        super().__init__(
            backend,
            "settings",
            sa.Column("name", sa.Text, primary_key=True),
            sa.Column("value", sa.Text, nullable=False),
        )
        name = self.name
        self._create = (
            f"CREATE TABLE IF NOT EXISTS {name} (name TEXT PRIMARY KEY, value TEXT NOT NULL)"
        )
        self._insert = Prepared(
            sa.text(
                f"INSERT INTO {name} (name, value) VALUES (:name, :value) ON CONFLICT DO NOTHING"
            ),
            self._dialect,
        )
        column = self.table.c
        self._select = Prepared(
            sa.select(column.value).where(column.name == sa.bindparam("name", type_=sa.Text)),
            self._dialect,
        )
        self._known: ModeMark | None = None
        self._read_at = -RECHECK

    def mark(self) -> ModeMark | None:
        """The forget-mode mark, or None (none recorded; the table may not exist)."""
        if self._known is not None:
            return self._known
        now = time.monotonic()
        # Inside a write section the answer read before it stands (no catalog reads there).
        if now - self._read_at < RECHECK or self._backend._depth:
            return None
        backend = self._backend
        # The catalog first, so a ledger without the table (every plain one) fails no query:
        # on PostgreSQL a failed statement is an aborted transaction, and a failure may look
        # like a dropped connection.
        rows = backend._rows(self._select, {"name": _MARK}) if self.exists() else []
        self._read_at = now
        if rows:
            try:
                data = json.loads(rows[0][0])
            except ValueError:
                data = rows[0][0]
            self._known = ModeMark.from_mapping(data, self.location)
        return self._known

    def record(self, mark: ModeMark) -> None:
        """Record ``mark`` unless a mark is there already (the first writer's stays)."""
        backend = self._backend
        with backend.transaction():
            backend._run(lambda: backend._exec(self._create))
            backend._many(self._insert, [{"name": _MARK, "value": mark.to_json()}])
        self._read_at = -RECHECK  # read back what is there now

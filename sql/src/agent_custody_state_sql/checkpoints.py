"""A SQL ledger's signed checkpoints: a table ``<events table>_checkpoints`` beside its events.

The TypeScript original reads only the events table, so a second table changes nothing for it. The
table is created by the first checkpoint written, inside the backend's write section (whose lock
serialises two processes creating it), and a ledger that never signs one has none. Replicas of a
server that share the database share the checkpoints, which a file on one host would not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa

from agent_custody_state_sql.schema import Prepared, SideTable

if TYPE_CHECKING:
    from agent_custody_state_sql.backend import SqlEventBackend


class SqlCheckpointLog(SideTable):
    """``CheckpointLog`` over the table ``<events table>_checkpoints`` (id, size, note)."""

    _backend: SqlEventBackend

    def __init__(self, backend: SqlEventBackend) -> None:
        super().__init__(
            backend,
            "checkpoints",
            sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
            sa.Column("size", sa.BigInteger, nullable=False),
            sa.Column("note", sa.Text, nullable=False),
        )
        self._create = (
            f"CREATE TABLE IF NOT EXISTS {self.name} "
            f"(id {backend.seq_ddl}, size BIGINT NOT NULL, note TEXT NOT NULL)"
        )
        self._insert = Prepared(
            self.table.insert().values(
                size=sa.bindparam("size", type_=sa.BigInteger),
                note=sa.bindparam("note", type_=sa.Text),
            ),
            self._dialect,
        )
        self._select = Prepared(
            sa.select(self.table.c.note).order_by(self.table.c.id), self._dialect
        )

    def add(self, note: str) -> None:
        size = int(note.split("\n", 2)[1])
        backend = self._backend
        with backend.transaction():
            backend._run(lambda: backend._exec(self._create))
            backend._many(self._insert, [{"size": size, "note": note}])

    def notes(self) -> list[str]:
        if not self.exists():  # none signed yet
            return []
        return [row[0] for row in self._backend._rows(self._select)]

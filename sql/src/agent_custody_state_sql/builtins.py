"""The SQL built-in functions the shared statements call, named for their dialect.

PostgreSQL looks a bare function name up along the ``search_path``: an aggregate ``count(*)``
or a ``substr(text, smallint, smallint)`` (the types the driver binds) in a schema listed before
``pg_catalog`` runs in place of the built-in, with the ledger role's privileges. So on
PostgreSQL every built-in is named in ``pg_catalog``. SQLite has no schemas for functions: the
names stay bare there, and the SQL it sees is what it always was.

The collation ``"C"`` is a schema object too: a collation of that name planted earlier on the
path (``FROM "en_US.utf8"``) ordered ``a A b B``, so the first values of ``key_values`` were not
the first in code-point order. ``code_points`` names it in ``pg_catalog``.

``COALESCE`` is no function on PostgreSQL (it is grammar, never looked up) and stays bare.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa


class Builtins:
    """The built-ins for one dialect (``Builtins(dialect.name)``), as SQLAlchemy expressions
    (``count``, ``max``, ``min``, ``substr``) and as names for SQL text (``name``)."""

    __slots__ = ("_catalog",)

    def __init__(self, dialect: str) -> None:
        self._catalog = dialect == "postgresql"

    def name(self, function: str) -> str:
        """``function`` as SQL text names it: ``pg_catalog.count`` on PostgreSQL."""
        return f"pg_catalog.{function}" if self._catalog else function

    def count(self) -> sa.ColumnElement[Any]:
        """``count(*)``: a qualified name takes its ``*`` as an argument (SQLAlchemy adds it
        only to the bare ``count()``)."""
        if self._catalog:
            return sa.func.pg_catalog.count(sa.literal_column("*"))
        return sa.func.count()

    def max(self, column: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
        return self._func.max(column)  # type: ignore[no-any-return]

    def min(self, column: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
        return self._func.min(column)  # type: ignore[no-any-return]

    def substr(self, *args: Any) -> sa.ColumnElement[Any]:
        return self._func.substr(*args)  # type: ignore[no-any-return]

    def code_points(self, column: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
        """``column`` ordered by code point: ``COLLATE pg_catalog."C"`` on PostgreSQL (whose
        ``collate`` would quote a qualified name whole); SQLite's order is code points."""
        if self._catalog:
            return column.op("COLLATE")(sa.literal_column('pg_catalog."C"'))
        return column

    @property
    def _func(self) -> Any:
        return sa.func.pg_catalog if self._catalog else sa.func

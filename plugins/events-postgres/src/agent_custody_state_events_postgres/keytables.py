"""The tables of the PostgreSQL key store, all in the schema its key table is found in.

``?table=<t>`` names the key table; the intents of a forget (``<t>_doomed``) and the erasure
flag (``<t>_erasure``, ``pending``) sit beside it. An unqualified name is looked up along the
role's ``search_path``, and each table looked up on its own could be another schema's, or be
created in another schema: with the default ``"$user", public`` and a schema named as the role
made after the keys, an erasure flag was made in the role's schema (a replica with another
``search_path`` never saw the mark), and a missing ``<t>_doomed`` made an empty ``<t>`` there
too (``CREATE TABLE IF NOT EXISTS`` looks only in the schema it creates in), which hid every key
of the table in ``public``. So the open finds the key table (``lockname.resolve``; made first
if missing) and names the other two in its schema, as the events' side tables are named in the
events table's (``SideTable``); every later statement names that schema.
"""

from __future__ import annotations

import hashlib
from typing import Any

from psycopg import sql

from agent_custody_state.plugin import KeyStoreError

from .location import MAX_IDENTIFIER
from .lockname import XACT_LOCK, advisory_key, lock_name, resolve
from .pending import ErasureFlag


class KeyTables:
    """The key store's tables: ``keys`` and ``doomed`` (identifiers), ``relations`` (quoted,
    as ``to_regclass`` reads them), as written in the location until ``setup`` finds the key
    table's schema, then in that schema."""

    def __init__(self, qualified: str, location: str) -> None:
        names = qualified.split(".")
        if len(names[-1].encode()) >= MAX_IDENTIFIER:  # "<t>_doomed", cut to 63 bytes, is "<t>"
            raise KeyStoreError(
                f'key store {location}: table name "{names[-1]}" is too long: PostgreSQL '
                f'cuts names to {MAX_IDENTIFIER} bytes, and "{names[-1]}_doomed" would be it; '
                f"keep it within {MAX_IDENTIFIER - 1} bytes"
            )
        self.written, self.location = qualified, location
        self._table = names[-1]
        self._named = names[0] if len(names) > 1 else None  # the location's schema, if any
        self._name(self._named)

    def _name(self, schema: str | None) -> None:
        prefix = [] if schema is None else [schema]
        keys, doomed = [*prefix, self._table], [*prefix, f"{self._table}_doomed"]
        self.keys, self.doomed = sql.Identifier(*keys), sql.Identifier(*doomed)
        self.relations = [_quoted(keys), _quoted(doomed)]
        self._erasure = _quoted([*prefix, f"{self._table}_erasure"])

    def setup(self, conn: Any, settle: bool) -> ErasureFlag:
        """On the autocommit psycopg connection ``conn``, under the setup lock: find the key
        table (made if missing, in the location's schema or else the first of ``search_path``),
        name the others in its schema, make the intents table if missing, and the erasure flag's
        when ``settle`` and the role may; a role that may only read tables that exist creates
        nothing. The erasure flag returned is settled under the key table's advisory lock."""
        digest = hashlib.sha256(f"agent-custody-state:keys:{self.written}".encode()).digest()
        with conn.transaction():
            conn.execute(
                f"SELECT {XACT_LOCK}(%s)",
                (int.from_bytes(digest[:8], "big", signed=True),),
            )
            found = resolve(conn, self.relations[0])
            if found is None:
                self._create(conn)
                found = resolve(conn, self.relations[0])
            if found is None:  # made in this transaction: always found
                raise KeyStoreError(f"key store {self.location}: the key table was not created")
            self._name(found[0])
            if conn.execute(_FIND, (self.relations[1],)).fetchone()[0] is None:
                conn.execute(_INTENTS.format(self.doomed))
            flag = ErasureFlag(
                self._erasure,
                self.location,
                advisory_key(f"keys:{lock_name(conn, self.relations[0], self.written)}", "settle"),
                found[0],
                fits=len(f"{self._table}_erasure".encode()) <= MAX_IDENTIFIER,
            )
            if settle:
                flag.create(conn)
            else:
                flag.probe(conn)
        return flag

    def _create(self, conn: Any) -> None:
        if self._named:
            conn.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self._named))
            )
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (kid TEXT PRIMARY KEY, key BYTEA NOT NULL)"
            ).format(self.keys)
        )


_FIND = "SELECT pg_catalog.to_regclass(%s)"

#: The intents table (a forget's keys, doomed before its commit).
_INTENTS = sql.SQL("CREATE TABLE IF NOT EXISTS {} (kid TEXT PRIMARY KEY, fact_id TEXT NOT NULL)")


def _quoted(names: list[str]) -> str:
    """``names`` quoted and joined, as ``to_regclass`` reads a qualified name."""
    return ".".join('"' + name.replace('"', '""') + '"' for name in names)

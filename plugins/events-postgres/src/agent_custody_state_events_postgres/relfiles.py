"""The files on this machine that hold a table's rows: for byte scans (``local_files``).

Both the event table (``store``) and the key tables (``keystore``) answer ``local_files()`` the
same way: after a ``CHECKPOINT`` (so the pages the server caches are written out; skipped when
the role may not run it), the relation files of each table, its TOAST table and every index of
either, found with ``pg_relation_filepath`` under ``data_directory``, with their 1 GB segments.
None when the data directory is not on this machine (a remote server) or the role may not read
``data_directory`` (``pg_read_all_settings``): the tables are then not scannable. A server that
does not answer within ``operation_timeout``, or a dropped connection, is an error instead: the
tables were not found unscannable, the question went unanswered.
"""

from __future__ import annotations

import glob
import logging
import os
from collections.abc import Sequence
from typing import Any

log = logging.getLogger(__name__)

#: The file paths (relative to the data directory) of a table, its TOAST table and every index
#: of either: where a row's bytes can be on disk.
_RELATION_FILES = """
WITH t AS (SELECT pg_catalog.to_regclass(%s) AS oid),
tables AS (
  SELECT oid FROM t
  UNION SELECT c.reltoastrelid FROM pg_catalog.pg_class c JOIN t ON c.oid = t.oid WHERE c.reltoastrelid <> 0
)
SELECT pg_catalog.pg_relation_filepath(oid) FROM tables
UNION SELECT pg_catalog.pg_relation_filepath(indexrelid) FROM pg_catalog.pg_index WHERE indrelid IN (SELECT oid FROM tables)
"""


def find_relations(conn: Any, tables: Sequence[str]) -> tuple[str, list[str]] | None:
    """Checkpoint, then the data directory and the relation paths of ``tables`` (qualified
    names, as ``to_regclass`` takes them) over the psycopg connection ``conn`` (autocommit);
    None when the role may not ask."""
    try:
        try:
            conn.execute("CHECKPOINT")
        except Exception:  # a role without pg_checkpoint: the scan reads what is written
            _kept(conn)
        where = conn.execute("SELECT pg_catalog.current_setting('data_directory')").fetchone()
        relations = [
            str(row[0])
            for table in tables
            for row in conn.execute(_RELATION_FILES, (table,)).fetchall()
            if row[0]
        ]
    except Exception as exc:  # a role without pg_read_all_settings: not scannable
        _kept(conn)
        log.info("relation files of %s not found (%s)", ", ".join(tables), exc)
        return None
    return str(where[0]), relations


def _kept(conn: Any) -> None:
    """Re-raise the error being handled if it cost the connection: no answer within
    ``operation_timeout`` (``deadline``) or a dropped connection is the caller's failure (its
    connection is replaced), not a table that is not scannable."""
    if conn.closed or conn.broken:
        raise


def relation_files(found: tuple[str, list[str]] | None) -> list[str] | None:
    """The local files of what ``find_relations`` found (each relation's segments past the
    first included); None when the data directory is not on this machine."""
    if found is None or not os.path.isdir(found[0]):
        return None
    datadir, relations = found
    files: list[str] = []
    for rel in relations:
        base = os.path.join(datadir, rel)
        segments = glob.glob(glob.escape(base) + ".[0-9]*")  # 1 GB segments past the first
        files += [base, *sorted(segments, key=lambda p: int(p.rsplit(".", 1)[1]))]
    return files

"""Database connections inherited across ``fork()``: never used, never closed, by the child.

A process forked after a backend opened its connection (gunicorn ``--preload``,
``multiprocessing`` with ``fork``, Celery prefork) inherits the connection object: a PostgreSQL
session's socket, which two processes writing at once interleave (wrong answers, errors, a
session killed), or SQLite's in-process lock bookkeeping, which SQLite forbids carrying across
``fork()``. The owner of such a connection remembers the process that opened it, and on its
first use in another process (one ``os.getpid()`` compare) sets the inherited connection aside
(``keep``) and opens a new one.

Set aside is not closed: closing a psycopg connection sends Terminate on the socket and ends
the parent's session, and closing an inherited SQLite connection runs its close-time work
(checkpoint, WAL removal) on files the parent is using. So it stays referenced for the child's
life (garbage collection would close it). A PostgreSQL socket is also pointed at ``/dev/null``
(``blind``): whatever the child does with the object later writes nothing to the parent's
session. A SQLite file is not: its close could then act on the real ``-wal`` by path.

Each owner is registered with the core's ``watch_forks`` (``os.register_at_fork``): in the
child, right after the fork and before any other thread exists, its ``_after_fork`` runs (a new lock: one held by a thread of
the parent at the fork would never be released in the child; the inherited connection set
aside at once, so not even a section the forking thread was in can use it).
"""

from __future__ import annotations

import os
from contextlib import suppress
from typing import Any, NoReturn

#: Connections set aside in this process: referenced until it exits, never closed.
_KEPT: list[tuple[Any, ...]] = []


def keep(*objects: Any) -> None:
    """Keep ``objects`` (an inherited connection and what wraps it) referenced for good."""
    _KEPT.append(objects)


def blind(fd: int) -> None:
    """Point the descriptor ``fd`` of an inherited socket at ``/dev/null`` in this process."""
    null = os.open(os.devnull, os.O_RDWR)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)


def forsake_psycopg(conn: Any, *more: Any) -> None:
    """Keep a psycopg connection inherited across fork() (and ``more``), its socket blind."""
    keep(conn, *more)
    with suppress(Exception):
        blind(conn.pgconn.socket)


class Gone:
    """Stands for a connection set aside: any use raises ``error`` (the driver's error class,
    so the callers that tolerate a failed ``ROLLBACK`` tolerate this too)."""

    def __init__(self, error: type[Exception], location: str) -> None:
        self._error, self._location = error, location

    def __getattr__(self, name: str) -> NoReturn:
        raise self._error(f"{self._location}: connection inherited across fork() is not used")

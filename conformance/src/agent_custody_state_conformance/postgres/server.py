"""``EmbeddedPostgres``: a running server, its URLs, and what erasure tests ask of it.

Besides URLs and databases per test, it can checkpoint, retire WAL segments and scan its data
directory for bytes, so a test can show where a forgotten value left a copy (relation files,
``pg_wal``) and where it did not.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .connect import (
    ADMIN_ROLE,
    APP_ROLE,
    check_database_name,
    import_psycopg,
    libpq_url,
    to_sqlalchemy_url,
)

if TYPE_CHECKING:
    import psycopg

__all__ = ["EmbeddedPostgres"]


class EmbeddedPostgres:
    """A running embedded PostgreSQL server. Create it with :func:`start_embedded_postgres`.

    The passwords are attributes because tests need them (to build URLs, or to check that
    something displayed does not leak them); ``repr()`` never shows them.
    """

    def __init__(
        self,
        *,
        server: Any,
        data_dir: Path,
        socket_dir: Path,
        port: int,
        password: str,
        admin_password: str,
        startup_seconds: float,
    ) -> None:
        self._server = server
        self._stopped = False
        #: The PGDATA directory. Erasure tests scan its files (see :meth:`files_containing`).
        self.data_dir = data_dir
        #: Directory holding the ``.s.PGSQL.<port>`` Unix socket (often ``data_dir`` itself).
        self.socket_dir = socket_dir
        self.port = port
        #: The login role for the code under test, and its password.
        self.user = APP_ROLE
        self.password = password
        self.admin_password = admin_password
        #: Wall-clock seconds from ``get_server`` to a password-protected, ready server.
        self.startup_seconds = startup_seconds
        #: Default database (owned by :attr:`user`) and its URLs.
        self.database = APP_ROLE
        self.url = self.url_for(self.database)
        self.sqlalchemy_url = to_sqlalchemy_url(self.url)
        #: Superuser URL, for administration that the application role may not do.
        self.admin_url = libpq_url(ADMIN_ROLE, admin_password, "postgres", socket_dir, port)

    def __repr__(self) -> str:
        return (
            f"EmbeddedPostgres(data_dir={str(self.data_dir)!r}, "
            f"socket_dir={str(self.socket_dir)!r}, port={self.port}, user={self.user!r}, "
            f"stopped={self._stopped})"
        )

    @property
    def pid(self) -> int:
        """Process id of the postmaster."""
        return int(self._server.get_pid())

    def url_for(self, database: str) -> str:
        """The libpq URL (with password) for ``database`` as :attr:`user`."""
        return libpq_url(
            self.user, self.password, check_database_name(database), self.socket_dir, self.port
        )

    def sqlalchemy_url_for(self, database: str) -> str:
        """Like :meth:`url_for`, in SQLAlchemy's ``postgresql+psycopg://`` form."""
        return to_sqlalchemy_url(self.url_for(database))

    def _admin(self, database: str = "postgres") -> psycopg.Connection[Any]:
        psycopg_module = import_psycopg()
        url = libpq_url(ADMIN_ROLE, self.admin_password, database, self.socket_dir, self.port)
        # autocommit: CREATE/DROP DATABASE and CHECKPOINT refuse to run in a transaction.
        conn: psycopg.Connection[Any] = psycopg_module.connect(url, autocommit=True)
        return conn

    def create_database(self, name: str) -> str:
        """Create an empty database owned by :attr:`user` (with pgvector); return its URL."""
        from psycopg import sql

        check_database_name(name)
        with self._admin() as conn:
            conn.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(name), sql.Identifier(self.user)
                )
            )
        return self.url_for(name)

    def drop_database(self, name: str) -> None:
        """Drop ``name``, disconnecting any sessions a test left open."""
        from psycopg import sql

        check_database_name(name)
        with self._admin() as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    def database_dir(self, name: str) -> Path:
        """The ``base/<oid>`` directory that holds ``name``'s tables and indexes."""
        with self._admin() as conn:
            row = conn.execute(
                "SELECT oid FROM pg_database WHERE datname = %s", (check_database_name(name),)
            ).fetchone()
        if row is None:
            raise LookupError(f"no database named {name!r}")
        return self.data_dir / "base" / str(row[0])

    def checkpoint(self) -> None:
        """Write every dirty shared buffer to the data files.

        A committed row is at first only in WAL and shared memory; table files get it at the
        next checkpoint. Call this before scanning :attr:`data_dir`.
        """
        with self._admin() as conn:
            conn.execute("CHECKPOINT")

    @contextmanager
    def scannable(self) -> Iterator[None]:
        """While open, the application role may read ``data_directory`` and run ``CHECKPOINT``
        (``pg_read_all_settings``, ``pg_checkpoint``), as a local operator's role would: what
        ``local_files`` needs to name relation files. The grants are revoked on exit."""
        roles = ("pg_read_all_settings", "pg_checkpoint")
        with self._admin() as conn:
            have = {r[0] for r in conn.execute("SELECT rolname FROM pg_roles").fetchall()}
            granted = [r for r in roles if r in have]  # pg_checkpoint: PostgreSQL 15 and later
            for role in granted:
                conn.execute(f"GRANT {role} TO {self.user}")
        try:
            yield
        finally:
            with self._admin() as conn:
                for role in granted:
                    conn.execute(f"REVOKE {role} FROM {self.user}")

    def rotate_wal(self) -> None:
        """Retire every WAL segment written so far, so none of its bytes stay on disk.

        Two rounds of switch + checkpoint: the first makes the old segments unneeded, the
        second removes them. With ``wal_recycle = off`` they are unlinked, not renamed.
        """
        with self._admin() as conn:
            for _ in range(2):
                conn.execute("SELECT pg_switch_wal()")
                conn.execute("CHECKPOINT")

    def files_containing(self, needle: bytes, under: Path | None = None) -> list[Path]:
        """Regular files under ``under`` (default :attr:`data_dir`) whose bytes contain ``needle``.

        Only a plain, uncompressed copy is found: PostgreSQL compresses values larger than
        about 2 kB (TOAST), so erasure tests should use short or random markers.
        """
        root = under if under is not None else self.data_dir
        found: list[Path] = []
        for dirpath, _dirnames, filenames in os.walk(root):
            for filename in filenames:
                path = Path(dirpath) / filename
                try:
                    # Skip the Unix socket and anything else that is not a plain file.
                    if not path.is_file():
                        continue
                    if needle in path.read_bytes():
                        found.append(path)
                except FileNotFoundError:
                    # The server removes temporary and retired files while we walk.
                    continue
        return sorted(found)

    def stop(self) -> None:
        """Stop the server and delete :attr:`data_dir`. Safe to call twice."""
        if self._stopped:
            return
        self._stopped = True
        self._server.cleanup()

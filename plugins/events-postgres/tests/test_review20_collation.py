"""``key_values`` on a database whose collation is not code-point order (twentieth review).

Most PostgreSQL databases are created with the host's locale (``en_US.UTF-8``), which orders
"a" before "Z". ``key_values`` took the first ``limit`` values in the database's order and then
sorted them by code point, as the ledger answers (EB-2.9-keys): with the subjects "B", "Z", "a"
and a limit of 2 it answered ["B", "a"], leaving out "Z". It now orders by code point in SQL.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.backend import EventBackend

SUBJECTS = ["B", "Z", "a", "b", "É", "_x", "10", "9"]


def _locale_database(embedded_postgres: Any, name: str) -> str:
    """A database in ``en_US.UTF-8``; skips where the machine has no such locale."""
    with embedded_postgres._admin() as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        try:
            conn.execute(
                f"CREATE DATABASE {name} TEMPLATE template0 LOCALE 'en_US.UTF-8' "
                f"OWNER {embedded_postgres.user}"
            )
        except psycopg.Error as exc:  # no glibc locale, and this build has no ICU
            pytest.skip(
                "this machine has no en_US.UTF-8 locale (Debian: `locale-gen en_US.UTF-8`), "
                f"and the embedded PostgreSQL has no ICU, so no database orders otherwise: {exc}"
            )
    url: str = embedded_postgres.url_for(name)
    return url


def test_key_values_follow_code_points_under_the_databases_collation(
    embedded_postgres: Any,
) -> None:
    url = _locale_database(embedded_postgres, "review20_collation")
    try:
        with Ledger(f"{url}{'&' if '?' in url else '?'}table=events") as ledger:
            for subject in SUBJECTS:
                ledger.assert_fact(subject=subject, predicate="p", value=1, space="org", actor="a")
            for limit in range(1, len(SUBJECTS) + 1):
                assert ledger.key_values("subject", "", limit) == sorted(SUBJECTS)[:limit]
    finally:
        with embedded_postgres._admin() as conn:
            conn.execute("DROP DATABASE IF EXISTS review20_collation WITH (FORCE)")


def test_the_key_values_query_orders_by_code_point_on_postgresql(
    pg_factory: Callable[..., EventBackend],
) -> None:
    """Where no database of another collation can be made (no locale, no ICU): the query."""
    backend: Any = pg_factory()
    try:
        for ranged in (False, True):
            sql = backend._q.key_values("subject", ranged).sql
            assert 'ORDER BY events.subject COLLATE pg_catalog."C"' in sql.replace(
                "public.ledger.", "events."
            )
    finally:
        backend.close()

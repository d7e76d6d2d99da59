"""Twenty-second review: the shared SQL layer's built-ins (``count``, ``max``, ``min``,
``substr``) are named in ``pg_catalog`` on PostgreSQL, so an aggregate or function of the same
name planted in a schema earlier on the ``search_path`` never runs in their place.

The schema, its recording functions and views and the connections that put it first are
``test_review22_planted``'s (``plant``); this module adds recording aggregates of those names
with the argument types the ledger passes (``count(*)``, ``max`` and ``min`` of the ``bigint``
``seq``, ``min`` of a ``text`` column) and ``substr`` with each integer type a driver may bind
(an exact match wins over the built-in's ``substr(text, integer, integer)``). Each records its
call in ``planted.calls`` and answers as the built-in would.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
import test_review22_planted as planted
from test_review22_planted import planted_url  # noqa: F401 (the fixture, used by name)

from agent_custody_state import Ledger
from agent_custody_state_events_postgres.location import libpq_url, parse_location

#: (name, argument, state type, built-in transition function): aggregates whose final
#: function records the call (it runs once per call, on no rows too).
AGGREGATES = [
    ("count", "*", "bigint", "int8inc"),
    ("max", "bigint", "bigint", "int8larger"),
    ("min", "bigint", "bigint", "int8smaller"),
    ("min", "text", "text", "text_smaller"),
]

#: Values whose code-point order (``A B a b``) is not a natural language's (``a A b B``).
CASES = ["a", "B", "b", "A"]

#: The integer types a driver may bind ``substr``'s start and length as.
SUBSTR_INTS = ("smallint", "integer", "bigint")


def plant_sql(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    for i, (name, argument, state, step) in enumerate(AGGREGATES):
        conn.execute(
            f"CREATE FUNCTION planted.final_{i}({state}) RETURNS {state} LANGUAGE plpgsql AS $$ "
            f"BEGIN INSERT INTO planted.calls VALUES ('{name}({argument})'); RETURN $1; END $$"
        )
        conn.execute(
            f"CREATE AGGREGATE planted.{name}({argument}) (sfunc = pg_catalog.{step}, "
            f"stype = {state}, finalfunc = planted.final_{i}"
            + (", initcond = '0')" if name == "count" else ")")
        )
    for kind in SUBSTR_INTS:
        conn.execute(
            f"CREATE FUNCTION planted.substr(text, {kind}, {kind}) RETURNS text "
            f"LANGUAGE plpgsql AS $$ BEGIN INSERT INTO planted.calls VALUES ('substr({kind})'); "
            "RETURN pg_catalog.substr($1, $2::integer, $3::integer); END $$"
        )


def plant_collation(conn: psycopg.Connection[tuple[object, ...]]) -> str:
    """A collation ``planted."C"`` copied from one of the server's that orders ``a`` before
    ``B`` (a natural language's); the name of that one."""
    names = conn.execute(
        "SELECT collname FROM pg_catalog.pg_collation WHERE collprovider IN ('c', 'i') "
        "AND collencoding IN (-1, pg_catalog.pg_char_to_encoding('UTF8')) ORDER BY collname"
    ).fetchall()
    for (name,) in names:
        quoted = '"' + str(name).replace('"', '""') + '"'
        if conn.execute(f"SELECT 'a' < 'B' COLLATE pg_catalog.{quoted}").fetchone() == (True,):
            conn.execute(f'CREATE COLLATION planted."C" FROM pg_catalog.{quoted}')
            return str(name)
    raise AssertionError(f"no collation of the server orders 'a' before 'B': {names}")


@pytest.fixture
def sql_planted_url(planted_url: str) -> str:  # noqa: F811 (the imported fixture)
    with psycopg.connect(libpq_url(parse_location(planted_url).connect_url)) as conn:
        plant_sql(conn)
    return planted_url


def test_the_planted_aggregates_run_when_called_by_their_bare_names(sql_planted_url: str) -> None:
    """The probe's premise: on such a connection the bare names, with the argument types the
    driver binds, run the planted ones (and answer as the built-ins do)."""
    with psycopg.connect(libpq_url(parse_location(sql_planted_url).connect_url)) as conn:
        row = conn.execute(
            "SELECT count(*), max(x::bigint), min(x::bigint), min(x::text), "
            "substr('abc', %s, %s) FROM pg_catalog.generate_series(1, 3) AS x",
            (1, 2),
        ).fetchone()
        conn.execute("SELECT count(*) FROM planted.calls WHERE false")  # on no rows too
    assert row == (3, 3, 1, "1", "ab")
    assert sorted(set(planted.calls(sql_planted_url))) == [
        "count(*)",
        "max(bigint)",
        "min(bigint)",
        "min(text)",
        "substr(smallint)",
    ]


def test_no_planted_aggregate_runs(sql_planted_url: str, embedded_postgres: Any) -> None:
    """Open, writes, reads, a certified and a crypto-shred forget, ``verify``
    (``planted_and_used``), then the reads that use the SQL layer's built-ins: a count, the
    spaces, key values by prefix, history, an as-of read and the index check (of an edited
    row: its position is a count)."""
    with embedded_postgres.scannable():
        planted.planted_and_used(sql_planted_url)
    with Ledger(sql_planted_url) as led:
        fact = led.assert_fact(**planted.FACT, value="v2")
        assert led.count() >= 6
        assert led.count() >= 6  # the second count: the rows after the last one counted
        assert led.spaces() == ["o"]
        assert "s0" in led.key_values("subject", "s")
        assert [e.kind for e in led.history(fact.fact_id)] == ["assert"]
        assert led.as_of(tx_at=led.now(), subject="s")
        with psycopg.connect(libpq_url(parse_location(sql_planted_url).connect_url)) as conn:
            conn.execute("UPDATE events SET subject = 'edited' WHERE subject = 's0'")
        assert [why for _, why in led.backend.index_problems()] == [  # its position: a count
            "its subject column reads 'edited' but the event says 's0' (reads find events by "
            "that column)"
        ]
    assert planted.calls(sql_planted_url) == []


def test_key_values_keep_code_point_order_under_a_planted_collation(planted_url: str) -> None:  # noqa: F811
    """``COLLATE "C"`` found ``planted."C"`` first: the first two subjects were ``a`` and ``A``
    (then sorted), not ``A`` and ``B``."""
    with psycopg.connect(libpq_url(parse_location(planted_url).connect_url)) as conn:
        plant_collation(conn)
    with Ledger(planted_url) as led:
        led.assert_many([{**planted.FACT, "subject": s, "value": 1} for s in CASES])
        assert led.key_values("subject", limit=2) == ["A", "B"]
    assert planted.calls(planted_url) == []

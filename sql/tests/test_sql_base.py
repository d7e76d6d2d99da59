"""The shared SQL base on its own: the write section's failure paths, reconnects, the closed
check and row decoding, on a minimal dialect over the standard library's sqlite3.

The dialect plugins (``plugins/events-sqlite``, ``plugins/events-postgres``) run the full
conformance suite; these tests pin what the base promises every dialect and what the suite
cannot provoke on a healthy database: a COMMIT or a BEGIN that fails, a dropped connection.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from agent_custody_state import EventBackendError, Ledger
from agent_custody_state_sql import SqlEventBackend


class LiteBackend(SqlEventBackend):
    """The smallest dialect: SQLite through sqlite3, with switches to inject failures."""

    kind = "lite"
    seq_ddl = "INTEGER PRIMARY KEY AUTOINCREMENT"

    def __init__(self, path: Path) -> None:
        self.fail: dict[str, int] = {}  # statement -> how many more times it fails
        self.lost = False  # what _connection_lost answers
        self.connects = 0

        def connect() -> sqlite3.Connection:
            self.connects += 1
            return sqlite3.connect(path, check_same_thread=False)

        engine = sa.create_engine(
            "sqlite+pysqlite://",
            creator=connect,
            isolation_level="AUTOCOMMIT",
            poolclass=sa.pool.NullPool,
        )
        super().__init__(engine, location=str(path))

    def _exec(self, sql: str) -> None:
        key = sql.split()[0]
        if self.fail.get(key):
            self.fail[key] -= 1
            raise sqlite3.OperationalError(f"injected: {key} refused")
        super()._exec(sql)

    def _begin_write(self) -> None:
        self._exec("BEGIN IMMEDIATE")

    @contextmanager
    def _schema_lock(self, conn: Connection) -> Iterator[None]:
        conn.exec_driver_sql("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._rollback_quietly()
            raise
        conn.exec_driver_sql("COMMIT")

    def _json_field(self, *path: str) -> str:
        return f"json_extract(json, '$.{'.'.join(path)}')"

    def _ids_select(self, name: str) -> sa.Select[Any]:
        return sa.select(sa.column("value")).select_from(
            sa.func.json_each(sa.bindparam(name, type_=sa.Text))
        )

    def _ids_param(self, ids: Sequence[str]) -> Any:
        return json.dumps(list(ids))

    def _connection_lost(self) -> bool:
        return self.lost


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[LiteBackend]:
    store = LiteBackend(tmp_path / "events.db")
    yield store
    store.close()


def _write(ledger: Ledger, value: int) -> str:
    return ledger.assert_fact(
        subject="s", predicate="p", value=value, space="org", actor="a"
    ).fact_id


def test_a_failed_commit_is_not_acknowledged_and_rolled_back(backend: LiteBackend) -> None:
    ledger = Ledger(backend)
    _write(ledger, 1)
    backend.fail["COMMIT"] = 1
    with pytest.raises(EventBackendError) as caught:
        _write(ledger, 2)
    message = str(caught.value)
    assert message.startswith(f"{backend.location}: commit failed: injected: COMMIT refused;")
    assert "may or may not have been recorded" in message
    # Rolled back, and no transaction left open: the next write works.
    assert backend.count() == 1 and backend._depth == 0
    _write(ledger, 3)
    assert [f.value for f in ledger.facts()] == [1, 3]


def test_a_refused_begin_names_the_write_lock(backend: LiteBackend) -> None:
    backend.fail["BEGIN"] = 1
    with pytest.raises(
        EventBackendError, match="could not take the write lock: injected: BEGIN refused$"
    ):
        with backend.transaction():
            pytest.fail("the body ran without the write lock")
    assert backend._depth == 0 and backend.connects == 1  # a live connection is not replaced
    with backend.transaction():
        pass


def test_a_lost_connection_is_replaced_before_anything_is_written(backend: LiteBackend) -> None:
    ledger = Ledger(backend)
    backend.fail["BEGIN"] = 1
    backend.lost = True
    _write(ledger, 1)
    assert backend.connects == 2 and backend.count() == 1


def test_inside_a_section_a_lost_connection_is_an_error(backend: LiteBackend) -> None:
    """The transaction is gone with the connection: retrying on a new one could commit half."""
    ledger = Ledger(backend)
    _write(ledger, 1)
    backend.lost = True
    with pytest.raises(EventBackendError, match="closed database"):
        with backend.transaction():
            backend._raw.close()  # the server dropped us mid-section
            backend.count()
    assert backend.connects == 1 and backend._depth == 0
    # Outside a section, a read on a lost connection reconnects once and retries.
    assert backend.count() == 1 and backend.connects == 2


def test_a_closed_backend_refuses_sections_and_reads(backend: LiteBackend) -> None:
    backend.close()
    closed = f"^ledger {backend.location} is closed$"
    with pytest.raises(EventBackendError, match=closed):
        with backend.transaction():
            pytest.fail("a section ran on a closed backend")
    with pytest.raises(EventBackendError, match=closed):
        backend.count()
    backend.close()  # closing twice is harmless


def test_an_exception_in_a_section_leaves_nothing(backend: LiteBackend) -> None:
    ledger = Ledger(backend)
    _write(ledger, 1)
    with pytest.raises(KeyError), backend.transaction():
        _write(ledger, 2)  # a nested section: only the outer one commits
        raise KeyError("boom")
    assert backend.count() == 1 and backend._depth == 0


def test_a_bad_row_is_named_by_its_seq(backend: LiteBackend) -> None:
    ledger = Ledger(backend)
    fact_id = _write(ledger, 1)
    backend._raw.execute("UPDATE events SET json = '{not json' WHERE seq = 1")
    with pytest.raises(
        EventBackendError, match=f"^{backend.location}: the event with seq 1 is not a valid event"
    ):
        backend.events_for([fact_id])


def test_a_lone_surrogate_is_refused_not_a_crash(backend: LiteBackend) -> None:
    with pytest.raises(EventBackendError, match="lone surrogate"):
        backend.get_assert("\ud800")


def test_the_count_is_kept_and_follows_other_writers(tmp_path: Path) -> None:
    """``count`` scans once, then reads only the rows after the last one it saw; what a
    section counted is not kept, and a lost connection forgets what was kept."""
    path = tmp_path / "events.db"
    one, two = LiteBackend(path), LiteBackend(path)
    asked: list[str] = []
    rows = one._rows

    def spy(q: Any, params: Any = None) -> list[Any]:
        asked.append(
            "after" if q is one._q.count_after else "full" if q is one._q.count_top else ""
        )
        return rows(q, params)

    one._rows = spy  # type: ignore[method-assign]
    try:
        first, second = Ledger(one), Ledger(two)
        _write(first, 1)
        assert one.count() == 1
        for value in range(2, 5):
            _write(second, value)  # another writer's rows
        assert one.count() == 4 and one.count() == 4
        with pytest.raises(KeyError), one.transaction():
            _write(first, 5)
            assert one.count() == 5  # the section's own row, not kept
            raise KeyError("boom")
        assert one.count() == 4 and two.count() == 4
        _write(second, 6)
        assert one.count() == 5
        counts = [a for a in asked if a]
        assert counts[0] == "full" and set(counts[1:]) == {"after"}
        one.lost = True
        one._raw.close()  # the server dropped us: what was kept may be gone with it
        asked.clear()
        assert one.count() == 5 and [a for a in asked if a] == ["after", "full"]
    finally:
        one.close()
        two.close()


def test_a_column_that_disagrees_with_its_event_is_named(backend: LiteBackend) -> None:
    """The chain covers the JSON; reads go by the columns: ``index_problems`` names each row
    whose column was edited, by its position, and nothing on an intact table. A time column in
    another spelling is named too: reads compare the column as text."""
    ledger = Ledger(backend)
    ids = [_write(ledger, value) for value in range(4)]
    ledger.retract(fact_id=ids[1], actor="a", reason="r")
    assert backend.index_problems() == []
    with sqlite3.connect(backend.location) as raw:
        raw.execute("UPDATE events SET tx_time = replace(tx_time, 'Z', '+00:00') WHERE seq = 1")
        raw.execute("UPDATE events SET kind = 'retract' WHERE seq = 2")
        raw.execute("UPDATE events SET subject = NULL WHERE seq = 3")
        raw.execute("UPDATE events SET fact_id = 'other' WHERE seq = 5")
    found = backend.index_problems()
    assert [position for position, _ in found] == [1, 2, 3, 5]
    assert found[1][1] == (
        "its kind column reads 'retract' but the event says 'assert' "
        "(reads find events by that column)"
    )
    assert found[0][1].startswith("its tx_time column reads '") and "+00:00" in found[0][1]
    assert "its subject column reads None but the event says 's'" in found[2][1]
    assert f"its fact_id column reads 'other' but the event says '{ids[1]}'" in found[3][1]

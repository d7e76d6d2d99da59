"""The forget-mode mark of a PostgreSQL ledger: a table ``<events table>_settings`` beside it.

The conformance rule EB-S-mode-marked covers a plain opener that comes after a crypto-shred one;
these cover what is PostgreSQL's own: where the mark lives, that a plain ledger gets no table,
and that a plain-mode server already running when the ledger first takes crypto-shred mode
stops writing values once it reads the mark again (``settings.RECHECK``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import psycopg
import pytest

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.backends.keystore_memory import MemoryKeyStore
from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state_events_postgres.location import parse_location
from agent_custody_state_sql import settings

pytestmark = pytest.mark.postgres

FACT = {"subject": "acct:1", "predicate": "plan", "space": "org", "actor": "a"}


def _connect(postgres_url: str) -> psycopg.Connection:
    where = parse_location(f"{postgres_url}&table=events")
    return psycopg.connect(where.connect_url.replace("postgresql+psycopg", "postgresql"))


def _tables(postgres_url: str) -> set[str]:
    with _connect(postgres_url) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        return {row[0] for row in rows}


def test_the_mark_is_a_settings_table_and_a_plain_ledger_has_none(
    pg_factory: Callable[..., EventBackend], postgres_url: str
) -> None:
    with Ledger(pg_factory("plainbook")) as plain:
        plain.assert_fact(**FACT, value="plain")
    assert "plainbook_settings" not in _tables(postgres_url)
    keys = MemoryKeyStore("memory:vault")
    with Ledger(pg_factory("sealed"), forget_mode="crypto-shred", key_store=keys) as sealed:
        sealed.assert_fact(**FACT, value="secret")
    with _connect(postgres_url) as conn:
        rows = conn.execute("SELECT name, value FROM sealed_settings").fetchall()
    assert [(name, json.loads(value)) for name, value in rows] == [
        ("forget_mode", {"forget_mode": "crypto-shred", "key_store": "memory:vault"})
    ]


def test_a_plain_opener_already_running_reads_the_mark_again(
    pg_factory: Callable[..., EventBackend], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(settings, "RECHECK", 0.2)
    with Ledger(pg_factory("shared")) as plain:
        plain.assert_fact(**FACT, value="before the mode")
        keys = MemoryKeyStore()
        with Ledger(pg_factory("shared"), forget_mode="crypto-shred", key_store=keys) as sealed:
            sealed.assert_fact(**{**FACT, "subject": "acct:2"}, value="sealed")
        time.sleep(0.3)
        count = plain.count()
        with pytest.raises(LedgerError, match="crypto-shred mode") as refused:
            plain.assert_fact(**FACT, value="would be plaintext")
        assert refused.value.code == "crypto_shred" and plain.count() == count

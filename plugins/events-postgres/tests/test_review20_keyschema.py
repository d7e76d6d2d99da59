"""Twentieth review, last part: the PostgreSQL key store's tables beside its key table, and a
``compact`` called on its own not told that a forget stands.

With the default ``search_path`` (``"$user", public``) and a schema named as the role made after
the keys, the key store looked its intents table and erasure flag up along the path on their
own: a missing one was made in the role's schema, and a missing intents table made an empty key
table there too, which hid every key of a live fact (``keytables``). A failed ``compact`` said
"a forget is recorded ... do not forget it again" also when no forget came before it.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state_events_postgres.keystore import PostgresKeyStore

pytestmark = pytest.mark.postgres

KEY = bytes(range(32))


def _tables(url: str) -> list[tuple[str, str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT schemaname, tablename FROM pg_tables WHERE tablename LIKE 'keys%' ORDER BY 2, 1"
        ).fetchall()
    return [(str(schema), str(table)) for schema, table in rows]


def _keys_then_schema(url: str, dropped: str) -> str:
    """A key store made in ``public`` holding ``KEY``; then one of its tables (``dropped``) gone
    (a key database of an older layout, or a DBA's), and a schema named as the role made:
    first on the default search_path. Returns the key store's location."""
    location = f"{url}&table=keys"
    keys = PostgresKeyStore(location)
    keys.put({"k1": KEY})
    keys.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP TABLE {dropped}")
        conn.execute("CREATE SCHEMA custody")
    return location


BESIDE = [("public", "keys"), ("public", "keys_doomed"), ("public", "keys_erasure")]


def test_a_missing_intents_table_is_made_beside_the_keys_which_stay_found(
    postgres_url: str,
) -> None:
    """Before: ``CREATE TABLE IF NOT EXISTS keys`` made an empty ``custody.keys``, found first
    from then on: the key of a live fact was gone for every read."""
    keys = PostgresKeyStore(_keys_then_schema(postgres_url, "keys_doomed"))
    try:
        assert keys.get(["k1"]) == {"k1": KEY}
        keys.doom({"k1": "fact-1"})
        assert keys.doomed() == {"k1": "fact-1"}
    finally:
        keys.close()
    assert _tables(postgres_url) == BESIDE


def test_the_erasure_flag_is_made_beside_the_keys_and_its_mark_seen_there(
    postgres_url: str,
) -> None:
    """Before: the flag was made in ``custody``; a destroy's mark went there, where a replica
    with ``search_path=public`` (or another role) never looks, so its open never finishes it."""
    keys = PostgresKeyStore(_keys_then_schema(postgres_url, "keys_erasure"))
    try:
        keys.doom({"k1": "fact-1"})
        keys.destroy(["k1"])  # marked pending; not compacted
        assert keys.get(["k1"]) == {}
    finally:
        keys.close()
    assert _tables(postgres_url) == BESIDE
    with psycopg.connect(f"{postgres_url}&options=-csearch_path%3Dpublic") as conn:
        row = conn.execute("SELECT count(*) FROM keys_erasure").fetchone()
    assert row == (1,)


def test_a_crypto_shred_ledger_keeps_reading_its_values_after_the_roles_schema_appears(
    postgres_url: str,
) -> None:
    """The whole way, through a ledger: the live fact's value still opens, and a forget
    destroys its key in the key table it was kept in."""
    location = f"{postgres_url}&table=keys"
    with Ledger(postgres_url, forget_mode="crypto-shred", key_store=location) as ledger:
        live = ledger.assert_fact(subject="s", predicate="p", value="kept", space="o", actor="a")
        gone = ledger.assert_fact(subject="s", predicate="q", value="gone", space="o", actor="a")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("DROP TABLE keys_doomed")
        conn.execute("CREATE SCHEMA custody")
    with Ledger(postgres_url, forget_mode="crypto-shred", key_store=location) as ledger:
        assert ledger.get(live.fact_id).value == "kept"  # type: ignore[union-attr]
        ledger.forget(fact_id=gone.fact_id, actor="a", reason="r")
        assert ledger.get(gone.fact_id).value is None  # type: ignore[union-attr]
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT count(*) FROM public.keys").fetchone() == (1,)
    assert ("custody", "keys") not in _tables(postgres_url)


def _compact_refused(ledger: Ledger) -> str:
    with pytest.raises(EventBackendError) as refused:
        ledger.compact()
    return str(refused.value)


def test_a_compact_on_its_own_is_not_told_a_forget_stands(postgres_url: str) -> None:
    """A reader's ACCESS SHARE keeps VACUUM FULL waiting past the role's lock_timeout: a
    compact with no forget before it says what stopped it, not that a forget is recorded; a
    forget's compaction, and a compact while that forget's is unfinished, say it stands."""
    recorded = "a forget is recorded"
    url = f"{postgres_url}&options=-clock_timeout%3D200ms"
    with Ledger(url) as ledger:
        fact = ledger.assert_fact(subject="s", predicate="p", value="v", space="o", actor="a")
        backend: Any = ledger.backend
        with psycopg.connect(postgres_url) as reader:
            reader.execute("SELECT count(*) FROM events")  # holds ACCESS SHARE until it ends
            alone = _compact_refused(ledger)
            assert "lock_timeout" in alone and recorded not in alone
            with pytest.raises(EventBackendError, match=recorded):
                ledger.forget(fact_id=fact.fact_id, actor="a", reason="r")
            assert recorded in _compact_refused(ledger)  # that forget's is still unfinished
        ledger.compact()  # the reader gone: it finishes
        assert backend.compaction_residue() == []
        with psycopg.connect(postgres_url) as reader:
            reader.execute("SELECT count(*) FROM events")
            assert recorded not in _compact_refused(ledger)

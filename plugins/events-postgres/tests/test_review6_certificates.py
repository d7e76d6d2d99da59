"""Sixth review: an erasure certificate of a PostgreSQL ledger never claims more than is true.

- A transaction of the database older than the forget (here a snapshot held by another
  session) makes ``VACUUM FULL`` keep the forgotten row version. A long value is stored
  compressed (TOAST), where the byte scan cannot see it: the backend tells what its compaction
  left (``compaction_residue``) and the certificate is partial, naming it; with ``?vacuum=false``
  likewise. Without such a transaction a long value's certificate stays complete.
- ``ANALYZE`` copies sample values of the ``json`` column into the planner statistics
  (``pg_statistic``), and of the key store's ``key`` column the data keys: the forget clears
  them, and the certificate names the dead row versions of the statistics as a residual window.
- A forget whose compaction is cut off (its connection killed) gives no certificate; the next
  forget's compaction erases what the first left.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from erasurekit import Before18, kill_vacuums

from agent_custody_state import Ledger
from agent_custody_state.ledger.certverify import CertificateError, check_certificate
from agent_custody_state.ledger.envelope import kid_of
from agent_custody_state.ledger.shred import ShreddingBackend
from agent_custody_state.plugin import EventBackendError, ForgetEvent
from agent_custody_state.signing import IN_TOTO_TYPE, dsse_sign
from agent_custody_state_conformance import offline
from agent_custody_state_conformance.postgres import EmbeddedPostgres
from agent_custody_state_events_postgres.vacuum import clear_statistics

pytestmark = pytest.mark.postgres


def _predicate(done: Any) -> dict[str, Any]:
    return json.loads(base64.b64decode(done.certificate["payload"]))["predicate"]


def _long_value(marker: str) -> str:
    """About 9 kB that compress well: stored compressed, in TOAST."""
    return (marker + " the quick brown fox jumps over the lazy dog. ") * 160


@pytest.fixture
def scannable(embedded_postgres: EmbeddedPostgres) -> Iterator[None]:
    with embedded_postgres.scannable():
        yield


def _ledger(url: str, **options: Any) -> Ledger:
    return Ledger(url, forget_mode="plain", checkpoint_key=Ed25519PrivateKey.generate(), **options)


def test_a_snapshot_older_than_the_forget_makes_the_certificate_partial(
    postgres_url: str, scannable: None
) -> None:
    marker = "MARK-" + secrets.token_hex(8)
    value = _long_value(marker)
    with _ledger(f"{postgres_url}&table=events") as ledger:
        fact = ledger.assert_fact(subject="s", predicate="p", value=value, space="o", actor="a")
        with psycopg.connect(postgres_url, autocommit=True) as other:
            other.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            other.execute("SELECT 1 FROM pg_class LIMIT 1").fetchone()  # the snapshot
            done = ledger.forget(fact_id=fact.fact_id, actor="dpo", reason="r", certificate=True)
            # The old row version is still there: the snapshot reads the value.
            rows = other.execute("SELECT json FROM events WHERE kind = 'assert'").fetchall()
            assert any(marker in str(r[0]) for r in rows)
            other.execute("COMMIT")
    predicate = _predicate(done)
    assert predicate["verification"]["byteScan"]["hits"] == 0  # compressed: the scan is blind
    assert predicate["outcome"] == "partial", predicate["incomplete"]
    assert predicate["verification"]["result"] == "failed"
    assert any("VACUUM FULL kept" in w for w in predicate["verification"]["residue"])
    assert any("VACUUM FULL kept" in w["where"] for w in predicate["residualWindows"])
    check_certificate(done.certificate, done.key.public)  # a consistent partial
    # Signed as complete with the residue still named, it is refused (never a false complete).
    body = json.loads(base64.b64decode(done.certificate["payload"]))
    body["predicate"].update(outcome="complete", incomplete=[])
    forged = dsse_sign(IN_TOTO_TYPE, body, done.key)
    with pytest.raises(CertificateError):
        check_certificate(forged, done.key.public)
    pem = done.key.public.public_key.public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    offline.check_certificate(done.certificate, pem)  # the offline verifier agrees on both
    with pytest.raises(ValueError, match="outcome is complete, but it is not"):
        offline.check_certificate(forged, pem)


def test_a_snapshot_that_ended_before_the_check_leaves_nothing(
    postgres_url: str, scannable: None
) -> None:
    """A long value forgotten with no older transaction around: complete, no residue."""
    marker = "MARK-" + secrets.token_hex(8)
    with _ledger(f"{postgres_url}&table=events") as ledger:
        fact = ledger.assert_fact(
            subject="s", predicate="p", value=_long_value(marker), space="o", actor="a"
        )
        with psycopg.connect(postgres_url, autocommit=True) as other:
            other.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            other.execute("SELECT 1 FROM pg_class LIMIT 1").fetchone()
            other.execute("COMMIT")  # gone before the forget
            done = ledger.forget(fact_id=fact.fact_id, actor="dpo", reason="r", certificate=True)
    predicate = _predicate(done)
    assert predicate["outcome"] == "complete", predicate["incomplete"]
    assert "residue" not in predicate["verification"]


def test_no_vacuum_makes_a_long_values_certificate_partial(
    postgres_url: str, scannable: None
) -> None:
    marker = "MARK-" + secrets.token_hex(8)
    with _ledger(f"{postgres_url}&table=events&vacuum=false") as ledger:
        fact = ledger.assert_fact(
            subject="s", predicate="p", value=_long_value(marker), space="o", actor="a"
        )
        done = ledger.forget(fact_id=fact.fact_id, actor="dpo", reason="r", certificate=True)
    predicate = _predicate(done)
    assert predicate["outcome"] == "partial"
    assert any("?vacuum=false" in w for w in predicate["verification"]["residue"])


def _stats_hold(conn: psycopg.Connection[Any], table: str, text: str) -> list[str]:
    rows = conn.execute(
        "SELECT attname FROM pg_stats WHERE tablename = %s AND (histogram_bounds::text LIKE %s "
        "OR most_common_vals::text LIKE %s)",
        (table, f"%{text}%", f"%{text}%"),
    ).fetchall()
    return [r[0] for r in rows]


def test_the_forget_clears_the_statistics_analyze_took(postgres_url: str, scannable: None) -> None:
    marker = "MARK-" + secrets.token_hex(8)
    with _ledger(f"{postgres_url}&table=events") as ledger:
        facts = [
            ledger.assert_fact(
                subject=f"s{i}", predicate="p", value=f"{marker}-{i}", space="o", actor="a"
            )
            for i in range(5)
        ]
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute("ANALYZE events")  # as autovacuum does
            assert _stats_hold(conn, "events", f"{marker}-0") == ["json"]
            done = ledger.forget(
                fact_id=facts[0].fact_id, actor="dpo", reason="r", certificate=True
            )
            assert _stats_hold(conn, "events", f"{marker}-0") == []
    predicate = _predicate(done)
    assert predicate["outcome"] == "complete"
    assert any("pg_statistic" in w["where"] for w in predicate["residualWindows"])


def test_the_forget_clears_the_key_statistics_of_the_key_store(
    postgres_url: str, scannable: None
) -> None:
    with Ledger(
        f"{postgres_url}&table=events",
        forget_mode="crypto-shred",
        key_store=f"{postgres_url}&table=keys",
    ) as ledger:
        backend = ledger.backend
        assert isinstance(backend, ShreddingBackend)
        facts = [
            ledger.assert_fact(subject=f"s{i}", predicate="p", value=i, space="o", actor="a")
            for i in range(5)
        ]
        stored = backend.inner.get_assert(facts[0].fact_id)
        kid = kid_of(stored.fact.value) if stored is not None else None
        assert kid is not None
        key = backend.keys.get([kid])[kid]
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute("SET default_statistics_target = 1000")  # every key sampled
            conn.execute("ANALYZE keys")
            assert _stats_hold(conn, "keys", key.hex()) == ["key"]
            ledger.forget(fact_id=facts[0].fact_id, actor="dpo", reason="r")
            assert _stats_hold(conn, "keys", key.hex()) == []


def test_a_compaction_cut_off_gives_no_certificate_and_the_next_one_erases(
    postgres_url: str, embedded_postgres: EmbeddedPostgres, scannable: None
) -> None:
    """The forget's session is killed during its ``VACUUM FULL`` (and again in the retry on a
    new connection): the forget is committed, its call fails and no certificate is made; the
    next forget's compaction erases both values, and its certificate is complete."""
    marker = "MARK-" + secrets.token_hex(8)
    with _ledger(f"{postgres_url}&table=events") as ledger:
        first, second = (
            ledger.assert_fact(
                subject=f"s{i}", predicate="p", value=f"{marker}-{i}", space="o", actor="a"
            )
            for i in range(2)
        )
        with psycopg.connect(postgres_url, autocommit=True) as other:
            other.execute("BEGIN")
            other.execute("SELECT count(*) FROM events").fetchone()  # VACUUM FULL waits
            killer = threading.Thread(target=kill_vacuums, args=(embedded_postgres.admin_url, []))
            killer.start()
            try:
                with pytest.raises(EventBackendError):
                    ledger.forget(fact_id=first.fact_id, actor="dpo", reason="r", certificate=True)
            finally:
                killer.join()
                other.execute("COMMIT")
        assert isinstance(ledger.history(first.fact_id)[-1], ForgetEvent)  # committed
        done = ledger.forget(fact_id=second.fact_id, actor="dpo", reason="r", certificate=True)
        files = ledger.backend.local_files()
        assert files
        on_disk = b"".join(Path(f).read_bytes() for f in files)
    assert f"{marker}-0".encode() not in on_disk
    assert _predicate(done)["outcome"] == "complete"


def test_a_snapshot_in_the_key_database_keeps_the_key_and_the_scan_says_so(
    postgres_url: str, scannable: None
) -> None:
    """Crypto-shred: a snapshot older than the forget in the key store's database keeps the
    destroyed key's row version through ``VACUUM FULL``; a key is 32 bytes stored as they are,
    so the byte scan of the key store's files finds it and the certificate is partial."""
    with Ledger(
        f"{postgres_url}&table=events",
        forget_mode="crypto-shred",
        key_store=f"{postgres_url}&table=keys",
        checkpoint_key=Ed25519PrivateKey.generate(),
    ) as ledger:
        fact = ledger.assert_fact(subject="s", predicate="p", value="v", space="o", actor="a")
        with psycopg.connect(postgres_url, autocommit=True) as other:
            other.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            other.execute("SELECT 1 FROM pg_class LIMIT 1").fetchone()
            done = ledger.forget(fact_id=fact.fact_id, actor="dpo", reason="r", certificate=True)
            other.execute("COMMIT")
    predicate = _predicate(done)
    assert predicate["sanitization"]["category"] == "Purge"
    assert predicate["verification"]["byteScan"]["hits"] > 0
    assert predicate["outcome"] == "partial"


def test_before_postgresql_18_the_statistics_are_taken_anew(postgres_url: str) -> None:
    marker = "MARK-" + secrets.token_hex(8)
    with _ledger(f"{postgres_url}&table=events&vacuum=false") as ledger:
        facts = [
            ledger.assert_fact(
                subject=f"s{i}", predicate="p", value=f"{marker}-{i}", space="o", actor="a"
            )
            for i in range(5)
        ]
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute("ANALYZE events")
            ledger.forget(fact_id=facts[0].fact_id, actor="dpo", reason="r")
            assert _stats_hold(conn, "events", f"{marker}-0") == ["json"]
            assert clear_statistics(Before18(conn), '"events"', "json")
            assert _stats_hold(conn, "events", f"{marker}-0") == []
            assert _stats_hold(conn, "events", f"{marker}-1") == ["json"]  # taken anew

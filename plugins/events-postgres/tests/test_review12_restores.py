"""Twelfth review: a PostgreSQL key database restored alone is found (``erasurelog``).

A forget destroys its fact's data key; a backup of the key database taken before the forget
still holds it, and restored alone (the events current) it opens every old copy of the events
again, while the ledger no longer names the key. A file ledger logs each doom in
``<ledger>.shredded``; the PostgreSQL key store kept no log, so there the restore went
unnoticed: ``verify`` passed and ``repair`` left the key. Each doom now also records its fact and
key ids in ``<table>_shredded`` in the EVENTS' database, in the forget's own transaction, so
``verify`` with the key store fails naming the fact and ``repair --forget-mode crypto-shred``
(``ShreddingBackend.destroy_restored_keys``) destroys the key again; a live fact's key never.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main
from agent_custody_state.ledger.envelope import kid_of
from agent_custody_state.ledger.model import ForgetEvent, Forgotten
from agent_custody_state_conformance.postgres import EmbeddedPostgres
from agent_custody_state_events_postgres.store import PostgresBackend

pytestmark = pytest.mark.postgres

SECRET = "restored.key.secret@example.org"
KEPT = "kept.value@example.org"


@dataclass
class Setup:
    location: str  # the events: table ``events`` in the test's database
    events_url: str
    keys_url: str  # the default key database ``<db>_keys`` (table ``events_keys``)

    def open(self) -> Ledger:
        return Ledger(self.location, forget_mode="crypto-shred")

    def rows(self, url: str, query: str) -> list[tuple[Any, ...]]:
        with psycopg.connect(url) as db:
            return db.execute(query).fetchall()

    def key_rows(self) -> list[tuple[str, bytes]]:
        return [
            (str(k), bytes(v))
            for k, v in self.rows(self.keys_url, "SELECT kid, key FROM events_keys")
        ]

    def restore_keys(self, rows: list[tuple[str, bytes]]) -> None:
        """The key table as a backup holds it: these rows back (a restore of the key database
        alone; the events untouched)."""
        with psycopg.connect(self.keys_url) as db:
            db.execute("DELETE FROM events_keys")
            with db.cursor() as cur:
                cur.executemany("INSERT INTO events_keys (kid, key) VALUES (%s, %s)", rows)


@pytest.fixture
def setup(postgres_url: str, embedded_postgres: EmbeddedPostgres) -> Iterator[Setup]:
    # The default key database, which the test role (no CREATEDB) cannot create itself.
    database = postgres_url.split("@/", 1)[1].split("?", 1)[0]
    keys_url = embedded_postgres.create_database(f"{database}_keys")
    try:
        yield Setup(f"{postgres_url}&table=events", postgres_url, keys_url)
    finally:
        embedded_postgres.drop_database(f"{database}_keys")


@pytest.fixture
def role(postgres_url: str, embedded_postgres: EmbeddedPostgres) -> Iterator[tuple[str, Any]]:
    """Another login role of the test's database, with no privilege: (its URL, an admin
    connection to the database)."""
    name, password = f"r_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    parts = urlsplit(postgres_url)
    admin_url = urlsplit(embedded_postgres.admin_url)._replace(path=parts.path).geturl()
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'")
        url = parts._replace(netloc=f"{name}:{password}@{parts.netloc.split('@', 1)[1]}")
        try:
            yield url.geturl(), admin
        finally:
            admin.execute(f"DROP OWNED BY {name} CASCADE")
            admin.execute(f"DROP ROLE {name}")


def _kid(ledger: Ledger, fact_id: str) -> str:
    event = ledger.backend.inner.get_assert(fact_id)  # type: ignore[attr-defined]
    kid = kid_of(event.fact.value)
    assert kid is not None
    return kid


def _two_facts(setup: Setup) -> tuple[str, str, str, str]:
    with setup.open() as ledger:
        gone, kept = (
            ledger.assert_fact(subject=s, predicate="email", value=v, space="org", actor="a")
            for s, v in (("u:1", SECRET), ("u:2", KEPT))
        )
        return gone.fact_id, kept.fact_id, _kid(ledger, gone.fact_id), _kid(ledger, kept.fact_id)


def test_a_forget_logs_its_data_key_in_a_table_beside_the_events(setup: Setup) -> None:
    gone, _, kid, _ = _two_facts(setup)
    with setup.open() as ledger:
        ledger.forget(fact_id=gone, actor="dpo", reason="gdpr")
        assert ledger.backend.keystore().buried() == {gone: [kid]}
    assert setup.rows(setup.events_url, "SELECT fact_id, kid FROM events_shredded") == [(gone, kid)]
    tables = "SELECT count(*) FROM pg_class WHERE relname LIKE '%shredded%'"
    assert setup.rows(setup.keys_url, tables) == [(0,)]  # not with the keys: a restore keeps it
    assert setup.key_rows() and kid not in dict(setup.key_rows())


def test_a_key_database_restored_alone_fails_verify_and_repair_destroys_the_key_again(
    setup: Setup, capsys: pytest.CaptureFixture[str]
) -> None:
    gone, kept, kid, kept_kid = _two_facts(setup)
    backup = setup.key_rows()  # the key database's backup, taken before the forget
    with setup.open() as ledger:
        ledger.forget(fact_id=gone, actor="dpo", reason="gdpr")
    assert main(["verify", "--ledger", setup.location]) == 0
    capsys.readouterr()
    setup.restore_keys(backup)
    assert kid in dict(setup.key_rows())  # the destroyed key is back: old copies open again
    assert main(["verify", "--ledger", setup.location, "--forget-mode", "crypto-shred"]) == 1
    out = capsys.readouterr().out
    assert f"fact {gone} is forgotten, but its data key {kid} is in the key store" in out, out
    args = ["repair", "--ledger", setup.location, "--forget-mode", "crypto-shred"]
    assert main(args) == 0
    assert "destroyed again the data keys of 1 forgotten fact(s)" in capsys.readouterr().out
    assert dict(setup.key_rows()).keys() == {kept_kid}  # the live fact's key stays
    assert main(["verify", "--ledger", setup.location, "--forget-mode", "crypto-shred"]) == 0
    with setup.open() as ledger:
        fact = ledger.get(kept)
        assert fact is not None and fact.value == KEPT


def test_only_keys_of_facts_the_ledger_records_forgotten_are_destroyed_again(
    setup: Setup,
) -> None:
    gone, kept, kid, kept_kid = _two_facts(setup)
    backup = setup.key_rows()
    with setup.open() as ledger:
        shredder: Any = ledger.backend
        keys = shredder.keystore()
        ledger.forget(fact_id=gone, actor="dpo", reason="gdpr")
        keys.doom({kept_kid: kept})  # a forget of ``kept`` that then failed: its key spared
        keys.spare([kept_kid])
        assert keys.buried() == {gone: [kid], kept: [kept_kid]}
        assert shredder.destroy_restored_keys() == {}
        setup.restore_keys(backup)
        assert shredder.destroy_restored_keys(dry_run=True) == {gone: [kid]}
        assert kid in keys.get([kid])
        assert shredder.destroy_restored_keys() == {gone: [kid]}
        assert keys.get([kid, kept_kid]).keys() == {kept_kid}
        fact = ledger.get(kept)
        assert fact is not None and fact.value == KEPT


def test_the_log_row_commits_with_its_forget(setup: Setup) -> None:
    """Written in the forget's own transaction: a forget that rolls back leaves no row (and
    its key, spared), one that commits leaves its row before its key is destroyed."""
    gone, _, kid, _ = _two_facts(setup)
    with setup.open() as ledger:
        shredder: Any = ledger.backend
        forgotten = Forgotten(None, "none", ledger.now())
        event = ForgetEvent("e-x", forgotten.at, gone, "dpo", "r", digest_kind="none")
        with pytest.raises(RuntimeError), shredder.transaction([gone]):
            shredder.forget(gone, forgotten, event)
            seen = setup.rows(setup.events_url, "SELECT count(*) FROM events_shredded")
            assert seen == [(0,)], "another session saw the row before the commit"
            raise RuntimeError("the section fails after the forget")
        assert shredder.keystore().buried() == {}
        assert kid in shredder.keystore().get([kid])
        seen_at_destroy: list[Any] = []
        keys = shredder.keystore()
        destroy = keys.destroy

        def look_then_destroy(kids: Any) -> None:
            query = "SELECT fact_id, kid FROM events_shredded"
            seen_at_destroy.append(setup.rows(setup.events_url, query))
            destroy(kids)

        keys.destroy = look_then_destroy
        ledger.forget(fact_id=gone, actor="dpo", reason="gdpr")
        assert seen_at_destroy == [[(gone, kid)]]  # committed, seen by another session
        assert keys.get([kid]) == {}


def test_a_file_key_store_of_a_postgres_ledger_logs_beside_the_events(
    postgres_url: str, tmp_path: Path
) -> None:
    location, keys_file = f"{postgres_url}&table=events", tmp_path / "ledger.keys"
    with Ledger(location, forget_mode="crypto-shred", key_store=str(keys_file)) as ledger:
        shredder: Any = ledger.backend
        gone = ledger.assert_fact(subject="u", predicate="p", value=SECRET, space="o", actor="a")
        kid = _kid(ledger, gone.fact_id)
        shutil.copy(keys_file, tmp_path / "backup.keys")  # the key store's backup
        ledger.forget(fact_id=gone.fact_id, actor="dpo", reason="gdpr")
        assert shredder.keystore().buried() == {gone.fact_id: [kid]}
    assert not (tmp_path / "ledger.keys.shredded").exists()  # the log is with the events
    shutil.copy(tmp_path / "backup.keys", keys_file)  # restored alone
    with Ledger(location, forget_mode="crypto-shred", key_store=str(keys_file)) as ledger:
        shredder = ledger.backend
        assert shredder.destroy_restored_keys() == {gone.fact_id: [kid]}
        assert shredder.keystore().get([kid]) == {}


def test_a_role_that_may_not_create_the_log_forgets_warned_and_logs_once_it_exists(
    postgres_url: str, role: tuple[str, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The log never costs a forget: without it (no CREATE on the schema) the forget goes on,
    warned; once the table is there and granted, the same open key store logs again. (Keys in
    a file and ``vacuum=false``: the role does not own the tables, so it may not vacuum them.)"""
    url, admin = role
    name = urlsplit(url).username
    owner_at, role_at = f"{postgres_url}&table=events", f"{url}&table=events&vacuum=false"
    keys_file = str(tmp_path / "ledger.keys")
    with Ledger(owner_at, forget_mode="crypto-shred", key_store=keys_file) as owner:
        facts = [
            owner.assert_fact(subject=s, predicate="p", value=s, space="o", actor="a").fact_id
            for s in ("one", "two")
        ]
    with psycopg.connect(postgres_url, autocommit=True) as db:
        db.execute("DROP TABLE events_shredded")
    admin.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON events, events_settings TO {name}")
    admin.execute(f"GRANT USAGE ON SEQUENCE events_seq_seq TO {name}")
    with (
        caplog.at_level(logging.WARNING),
        Ledger(role_at, forget_mode="crypto-shred", key_store=keys_file) as ledger,
    ):
        keys = ledger.backend.keystore()
        kids = [_kid(ledger, f) for f in facts]
        ledger.forget(fact_id=facts[0], actor="dpo", reason="gdpr")
        assert keys.get(kids[:1]) == {} and keys.buried() == {}
        assert any("forgets keep no erasure log" in r.getMessage() for r in caplog.records)
        Ledger(owner_at, forget_mode="crypto-shred", key_store=keys_file).close()  # creates it
        admin.execute(f"GRANT SELECT, INSERT ON events_shredded TO {name}")
        ledger.forget(fact_id=facts[1], actor="dpo", reason="gdpr")
        assert keys.buried() == {facts[1]: [kids[1]]}


def test_a_key_store_passed_on_after_its_ledger_closed_still_logs(setup: Setup) -> None:
    """A key store made by one ledger's backend and given as an object to a later ledger (the
    first one closed) logs and reads on a connection of its own, in the same table."""
    gone, _, kid, _ = _two_facts(setup)
    made_by = PostgresBackend(setup.location)
    keys = made_by.keystore()
    made_by.close()
    try:
        with Ledger(setup.location, forget_mode="crypto-shred", key_store=keys) as ledger:
            ledger.forget(fact_id=gone, actor="dpo", reason="gdpr")
        assert keys.buried() == {gone: [kid]}
    finally:
        keys.close()
    rows = setup.rows(setup.events_url, "SELECT fact_id, kid FROM events_shredded")
    assert rows == [(gone, kid)]

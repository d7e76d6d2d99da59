"""Erasure certificates of a PostgreSQL ledger on the embedded server (docs/proofs.md): the key
store names its relation files (``local_files``), which hold a fact's data key before its forget
and not after; a crypto-shred forget by the command line gives a Purge certificate with no
residual windows whose scan read the events' and the keys' relation files, and ``certificate
verify --ledger`` checks it against the PostgreSQL ledger (and fails against another table).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state import Ledger
from agent_custody_state.ledger.bytescan import scan_files
from agent_custody_state.ledger.envelope import kid_of
from agent_custody_state.ledger.shred import ShreddingBackend
from agent_custody_state_conformance.certcli import forget_and_verify
from agent_custody_state_conformance.postgres import EmbeddedPostgres

pytestmark = pytest.mark.postgres


@pytest.fixture
def keys_database(embedded_postgres: EmbeddedPostgres, postgres_url: str) -> Iterator[str]:
    """The default key database ``<db>_keys``, which the test role may not create itself; and
    the role may read ``data_directory`` (else nothing is scannable: tested below)."""
    name = postgres_url.split("@/", 1)[1].split("?", 1)[0] + "_keys"
    embedded_postgres.create_database(name)
    try:
        with embedded_postgres.scannable():
            yield name
    finally:
        embedded_postgres.drop_database(name)


def test_without_the_setting_the_files_are_not_scannable(
    postgres_url: str, embedded_postgres: EmbeddedPostgres
) -> None:
    """A role that may not read ``data_directory`` gets None (not scannable), for the events
    and for the keys, and a certificate says so instead of claiming a clean scan."""
    with Ledger(
        f"{postgres_url}&table=events",
        forget_mode="crypto-shred",
        key_store=f"{postgres_url}&table=keys",
        checkpoint_key=Ed25519PrivateKey.generate(),
    ) as ledger:
        backend = ledger.backend
        assert isinstance(backend, ShreddingBackend)
        assert backend.local_files() is None and backend.keys.local_files() is None
        fact = ledger.assert_fact(
            subject="acct:1", predicate="email", value="x@example.org", space="org", actor="a"
        )
        done = ledger.forget(fact_id=fact.fact_id, actor="dpo", reason="r", certificate=True)
    statement = json.loads(base64.b64decode(done.certificate["payload"]))
    verification = statement["predicate"]["verification"]
    assert verification["byteScan"]["scanned"] is False
    assert verification["result"] == "not verified"


def test_key_store_files_hold_the_key_until_its_forget(
    postgres_url: str, keys_database: str, embedded_postgres: EmbeddedPostgres
) -> None:
    with Ledger(f"{postgres_url}&table=events", forget_mode="crypto-shred") as ledger:
        backend = ledger.backend
        assert isinstance(backend, ShreddingBackend)
        fact = ledger.assert_fact(
            subject="acct:1", predicate="email", value="x@example.org", space="org", actor="a"
        )
        stored = backend.inner.get_assert(fact.fact_id)
        kid = kid_of(stored.fact.value) if stored is not None else None
        assert kid is not None
        key = backend.keys.get([kid])[kid]
        files = backend.keys.local_files()
        assert files, "the embedded server's data directory is local: the keys are scannable"
        data_dir = str(embedded_postgres.data_dir)
        assert all(f.startswith(data_dir) for f in files), files
        assert scan_files(files, {"k": key})["k"].hits > 0
        ledger.forget(fact_id=fact.fact_id, actor="dpo", reason="r")
        assert scan_files(backend.keys.local_files() or [], {"k": key})["k"].hits == 0


def test_crypto_shred_certificate_verifies_against_the_postgres_ledger(
    postgres_url: str, keys_database: str, tmp_path: Path
) -> None:
    location = f"{postgres_url}&table=events"
    predicate = forget_and_verify(location, tmp_path, other=f"{postgres_url}&table=other")
    assert predicate["media"]["backend"] == "postgres"
    assert "password" not in predicate["media"]["location"]
    assert predicate["sanitization"]["category"] == "Purge"
    assert predicate["residualWindows"] == []
    scan = predicate["verification"]["byteScan"]
    assert scan["hits"] == 0 and {"raw", "utf-8"} <= set(scan["forms"])
    paths = [f["path"] for f in scan["files"]]
    assert any("/base/" in p for p in paths), paths  # relation files under the data directory
    assert predicate["outcome"] == "complete"


def test_plain_certificate_verifies_against_the_postgres_ledger(
    postgres_url: str, embedded_postgres: EmbeddedPostgres, tmp_path: Path
) -> None:
    location = f"{postgres_url}&table=plain"
    with embedded_postgres.scannable():
        predicate = forget_and_verify(
            location, tmp_path, other=f"{postgres_url}&table=other", forget_mode="plain"
        )
    assert predicate["sanitization"]["category"] == "Clear" and predicate["residualWindows"]
    assert predicate["verification"]["byteScan"]["hits"] == 0

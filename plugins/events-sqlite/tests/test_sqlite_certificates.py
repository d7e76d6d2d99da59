"""Erasure certificates of a SQLite ledger (docs/proofs.md, "Certificates"): a crypto-shred
forget by the command line gives a Purge certificate with no residual windows, whose byte scan
read the ledger's files and the key store's, and ``certificate verify --ledger`` checks it
against the SQLite ledger (and fails against another one); a plain forget's is Clear.
"""

from __future__ import annotations

from pathlib import Path

from agent_custody_state_conformance.certcli import forget_and_verify


def test_crypto_shred_certificate_verifies_against_the_sqlite_ledger(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    predicate = forget_and_verify(str(ledger), tmp_path, other=str(tmp_path / "other.sqlite"))
    assert predicate["media"]["backend"] == "sqlite"
    assert predicate["sanitization"]["category"] == "Purge"
    assert predicate["residualWindows"] == []
    scan = predicate["verification"]["byteScan"]
    scanned = {f["path"] for f in scan["files"]}
    assert {str(ledger), f"{ledger}-wal", f"{ledger}.keys"} <= scanned, scanned
    assert scan["hits"] == 0 and {"raw", "utf-8", "base64"} <= set(scan["forms"])
    assert predicate["outcome"] == "complete"


def test_plain_certificate_verifies_against_the_sqlite_ledger(tmp_path: Path) -> None:
    ledger = str(tmp_path / "plain.sqlite")
    other = str(tmp_path / "other.sqlite")
    predicate = forget_and_verify(ledger, tmp_path, other=other, forget_mode="plain")
    assert predicate["sanitization"]["category"] == "Clear" and predicate["residualWindows"]
    assert predicate["verification"]["byteScan"]["hits"] == 0

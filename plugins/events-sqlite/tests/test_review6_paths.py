"""Sixth review: one SQLite ledger, many spellings of its path (docs/decisions.md, "One ledger,
many spellings"). SQLite keeps its ``-wal`` and ``-shm`` beside the file a symlink names; the
key store, the byte scan's list and the read-only open must find them there too."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state import Ledger
from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state.ledger.certificate import CertificateOptions

SECRET = "dana.private@example.org"
FACT = {"subject": "s", "predicate": "p", "space": "o", "actor": "a"}


def _linked(tmp_path: Path) -> tuple[Path, Path, str]:
    real, link = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    with Ledger(real, forget_mode="crypto-shred") as ledger:
        fact_id = ledger.assert_fact(**FACT, value=SECRET).fact.fact_id
    link.symlink_to(real.name)
    return real, link, fact_id


def test_a_symlink_and_its_file_share_one_key_store(tmp_path: Path) -> None:
    """Through the link a second, empty key store ``b.sqlite.keys`` was created: the value
    read as null, and a forget through the link could not destroy its key."""
    _, link, fact_id = _linked(tmp_path)
    with Ledger(link, forget_mode="crypto-shred") as ledger:
        fact = ledger.get(fact_id)
        assert fact is not None and fact.value == SECRET
    assert not (tmp_path / "b.sqlite.keys").exists()


def test_the_byte_scan_names_the_wal_beside_the_real_file(tmp_path: Path) -> None:
    """The list named ``b.sqlite-wal``, which does not exist: the WAL that holds old page
    images is ``a.sqlite-wal``, and it went unscanned."""
    real, link, fact_id = _linked(tmp_path)
    with Ledger(link, forget_mode="crypto-shred") as ledger:
        done = ledger.forget(
            fact_id=fact_id,
            actor="dpo",
            reason="r",
            certificate=CertificateOptions(key=Ed25519PrivateKey.generate()),
        )
    scanned = [f["path"] for f in done.predicate["verification"]["byteScan"]["files"]]
    assert f"{real}-wal" in scanned and str(real) in scanned
    assert not any(p.startswith(str(link)) for p in scanned)


def test_a_read_only_open_through_a_symlink_reads_the_writers_wal(tmp_path: Path) -> None:
    """The read-only open looked for ``b.sqlite-wal``, found none and opened the file
    ``immutable``: the events a writer had committed into ``a.sqlite-wal`` were not seen."""
    real, link = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    link.symlink_to(real.name)
    with Ledger(real) as writer:
        writer.assert_fact(**FACT, value="one")
        assert Path(f"{real}-wal").stat().st_size > 0  # committed, not yet checkpointed
        with Ledger(link, read_only=True) as reader:
            assert [f.value for f in reader.as_of()] == ["one"]


def test_a_hard_linked_sqlite_ledger_is_refused_for_writing(tmp_path: Path) -> None:
    """SQLite names its WAL after the name it was opened by: two names, two WALs, one file."""
    real, other = tmp_path / "a.sqlite", tmp_path / "c.sqlite"
    with Ledger(real) as ledger:
        fact_id = ledger.assert_fact(**FACT, value="one").fact.fact_id
    os.link(real, other)
    for path in (real, other):
        with pytest.raises(EventBackendError, match="hard links"):
            Ledger(path)
    with Ledger(other, read_only=True) as reader:
        assert reader.get(fact_id) is not None

"""A ledger written in crypto-shred mode, opened in plain mode: it reads (envelopes as stored)
and records events without values, but refuses to write values, which it would store
unencrypted (``modemark.check_plain_values``); the files stay byte for byte as they were."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.backends.memory import MemoryBackend
from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state.ledger.envelope import kid_of
from agent_custody_state.ledger.modemark import ModeMark

FACT = {"subject": "acct:1", "predicate": "plan", "space": "org", "actor": "a"}


def _files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.parent.iterdir()) if p.is_file()}


def test_a_plain_opener_refuses_values_for_a_crypto_shred_ledger(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    with Ledger(path, forget_mode="crypto-shred") as sealed:
        fact = sealed.assert_fact(**FACT, value="secret")
    before = _files(path)
    with Ledger(path) as plain:
        [read] = plain.as_of(subject="acct:1")
        assert kid_of(read.value) is not None  # read as stored: the envelope
        with pytest.raises(LedgerError, match="crypto-shred mode") as refused:
            plain.assert_fact(**FACT, value="would be plaintext")
        assert refused.value.code == "crypto_shred"
        with pytest.raises(LedgerError, match="crypto-shred mode"):
            plain.assert_many([{**FACT, "value": "would be plaintext"}])
        with pytest.raises(LedgerError, match="crypto-shred mode"):
            plain.import_events(list(plain.export()))
        assert _files(path) == before
        plain.retract(fact_id=fact.fact_id, actor="ops", reason="no value written")
    with Ledger(path, forget_mode="crypto-shred") as again:
        again.assert_fact(**FACT, value="sealed again")


def test_a_plain_ledger_stays_writable_in_plain_mode(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    with Ledger(path) as plain:
        plain.assert_fact(**FACT, value="plain")
    with Ledger(path) as plain:
        plain.assert_fact(**FACT, value="plain again")
    assert not (tmp_path / "l.jsonl.keys").exists()


def test_a_key_store_elsewhere_is_named_by_the_mode_mark(tmp_path: Path) -> None:
    """With its keys on another path nothing beside the ledger is a key store: the mark
    (``<ledger>.mode``) tells the plain opener, and its refusal says where the keys are."""
    path, keys = tmp_path / "l.jsonl", tmp_path / "vault" / "ledger.keys"
    keys.parent.mkdir()
    with Ledger(path, forget_mode="crypto-shred", key_store=str(keys)) as sealed:
        sealed.assert_fact(**FACT, value="secret")
    assert not (tmp_path / "l.jsonl.keys").exists()
    mark = json.loads((tmp_path / "l.jsonl.mode").read_text())
    assert mark == {"forget_mode": "crypto-shred", "key_store": str(keys)}
    before = _files(path)
    with Ledger(path) as plain, pytest.raises(LedgerError, match=re.escape(str(keys))) as refused:
        plain.assert_fact(**FACT, value="would be plaintext")
    assert refused.value.code == "crypto_shred" and _files(path) == before
    with Ledger(path, forget_mode="crypto-shred", key_store=str(keys)) as again:
        [fact] = again.as_of(subject="acct:1")
        assert fact.value == "secret"


def test_a_mark_that_cannot_be_read_is_not_taken_for_plain(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    with Ledger(path) as plain:
        plain.assert_fact(**FACT, value="plain")
    (tmp_path / "l.jsonl.mode").write_text("crypto-shred?\n")
    before = _files(path)
    with Ledger(path) as plain, pytest.raises(EventBackendError, match=r"l\.jsonl\.mode: not a"):
        plain.assert_fact(**FACT, value="again")
    assert _files(path) == before


class _MarkFails(MemoryBackend):
    """A backend whose mark cannot be written (a read-only role or folder)."""

    def record_forget_mode(self, mark: ModeMark) -> None:
        raise EventBackendError("read-only")


def test_an_opener_that_cannot_record_the_mode_goes_on_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = _MarkFails()
    with caplog.at_level(logging.WARNING), Ledger(backend, forget_mode="crypto-shred") as sealed:
        sealed.assert_fact(**FACT, value="secret")
        [fact] = sealed.as_of(subject="acct:1")
    assert fact.value == "secret" and backend.recorded_forget_mode() is None
    assert "crypto-shred mode is not recorded with the ledger: read-only" in caplog.text


def test_a_default_key_store_moved_away_leaves_the_mark(tmp_path: Path) -> None:
    """The mode is recorded even when the key store is the default one beside the ledger, and a
    ledger written before the mark (its keys beside it, no mark) gets it at its next crypto-shred
    open: moving the key store elsewhere (another volume, as docs/forget.md advises) must not
    make the ledger read as plain."""
    name = "l.jsonl"
    path = tmp_path / name
    with Ledger(path, forget_mode="crypto-shred") as sealed:
        sealed.assert_fact(**FACT, value="secret")
    (tmp_path / f"{name}.mode").unlink()  # as a writer before the mark left it: keys beside
    with Ledger(path, forget_mode="crypto-shred"):
        pass
    assert (tmp_path / f"{name}.mode").exists()
    moved = tmp_path / "vault.keys"
    (tmp_path / f"{name}.keys").rename(moved)
    with Ledger(path) as plain, pytest.raises(LedgerError, match="crypto-shred mode"):
        plain.assert_fact(**FACT, value="would be plaintext")
    with Ledger(path, forget_mode="crypto-shred", key_store=str(moved)) as again:
        assert again.as_of(subject="acct:1")[0].value == "secret"


def test_an_open_refused_part_way_leaves_no_file(tmp_path: Path) -> None:
    """A new ledger whose key store (or checkpoint key) is refused leaves the folder as it was:
    no ledger file, no lock, no journal. An existing ledger keeps its files (SQLite: the
    plugin's ``test_sqlite_refusals.py``)."""
    name = "new.jsonl"
    with pytest.raises(Exception, match="does not exist"):
        Ledger(tmp_path / name, forget_mode="crypto-shred", key_store=str(tmp_path / "no" / "k"))
    with pytest.raises(LedgerError, match="cannot read signing key"):
        Ledger(tmp_path / name, checkpoint_key=str(tmp_path / "missing.key"))
    assert list(tmp_path.iterdir()) == []
    with Ledger(tmp_path / name) as ledger:
        ledger.assert_fact(**FACT, value=1)
    kept = _files(tmp_path / name)
    with pytest.raises(Exception, match="does not exist"):
        Ledger(tmp_path / name, forget_mode="crypto-shred", key_store=str(tmp_path / "no" / "k"))
    assert _files(tmp_path / name) == kept

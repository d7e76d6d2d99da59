"""A ledger written in crypto-shred mode, opened in plain mode: it reads (envelopes as stored)
and records events without values, but refuses to write values, which it would store
unencrypted (``shred.check_plain_values``); the files stay byte for byte as they were."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.ledger.envelope import kid_of

FACT = {"subject": "acct:1", "predicate": "plan", "space": "org", "actor": "a"}


def _files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.parent.iterdir())}


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

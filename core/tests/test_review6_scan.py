"""Sixth review: the byte scan of a short value that is not a string (docs/proofs.md, "Byte
scan"). ``1`` or ``true`` has no quotes to carry it: searched as it is, every ``1`` of every
timestamp was a hit, and the certificate of every such forget read ``partial``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state import Ledger
from agent_custody_state.keys import PublicKeyRef
from agent_custody_state.ledger.bytescan import needles
from agent_custody_state.ledger.certificate import CertificateOptions
from agent_custody_state.ledger.certverify import check_certificate

KEY = Ed25519PrivateKey.generate()


def _forget(path: Path, value: Any, beside: Any) -> dict[str, Any]:
    """Forget a fact holding ``value`` from a ledger that also holds ``beside``; the scan part
    and outcome of its certificate."""
    with Ledger(path) as ledger:
        fact = ledger.assert_fact(subject="s", predicate="n", value=value, space="org", actor="a")
        ledger.assert_fact(subject="t", predicate="n", value=beside, space="org", actor="a")
        done = ledger.forget(
            fact_id=fact.fact.fact_id,
            actor="dpo",
            reason="r",
            certificate=CertificateOptions(key=KEY),
        )
    predicate = check_certificate(done.certificate, PublicKeyRef.of(KEY.public_key()))["predicate"]
    return {"hits": predicate["verification"]["byteScan"]["hits"], "outcome": predicate["outcome"]}


@pytest.mark.parametrize(("value", "beside"), [(1, 12), (True, "true story"), ([2], 2.5)])
def test_a_short_value_is_found_only_where_it_stood(
    tmp_path: Path, value: Any, beside: Any
) -> None:
    assert _forget(tmp_path / "l.jsonl", value, beside) == {"hits": 0, "outcome": "complete"}


def test_another_fact_with_the_same_short_value_is_still_a_hit(tmp_path: Path) -> None:
    """A hit is never explained away: the scan cannot tell whose bytes they are."""
    found = _forget(tmp_path / "l.jsonl", 7, 7)
    assert found["hits"] >= 1 and found["outcome"] == "partial"


def test_a_null_value_has_nothing_to_find(tmp_path: Path) -> None:
    """The forget writes ``null`` where the value was: a null value leaves nothing to look for."""
    assert needles(None) == []
    assert _forget(tmp_path / "l.jsonl", None, "x") == {"hits": 0, "outcome": "complete"}

"""A crypto-shred forget whose data key is not in the ledger's key store: the certificate says
so and is ``partial``, never ``complete`` (the key may live on in another key store, so its
destruction is not verified); both verifiers refuse a certificate that hides it."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state import Ledger
from agent_custody_state.keys import PublicKeyRef, load_key_pair, load_public_ref
from agent_custody_state.ledger.certificate import CertificateOptions
from agent_custody_state.ledger.certverify import CertificateError, check_certificate
from agent_custody_state.server.signing import generate_key_pair
from agent_custody_state.signing import IN_TOTO_TYPE, dsse_sign

OFFLINE = "agent_custody_state_conformance.offline"
FACT = {"subject": "acct:1", "predicate": "email", "space": "org", "actor": "a"}


def test_a_key_in_another_key_store_makes_the_certificate_partial(tmp_path: Path) -> None:
    path, first, second = tmp_path / "l.jsonl", tmp_path / "a.keys", tmp_path / "b.keys"
    key_file, pub, _ = generate_key_pair(tmp_path / "k.key")
    with Ledger(path, forget_mode="crypto-shred", key_store=str(first)) as ledger:
        written = ledger.assert_fact(**FACT, value="dana@example.org")
    with Ledger(path, forget_mode="crypto-shred", key_store=str(second)) as other:
        done = other.forget(
            fact_id=written.fact_id,
            actor="dpo",
            reason="gdpr",
            keep_digest=False,  # with a digest the forget is refused: the value cannot be read
            certificate=CertificateOptions(key=key_file),
        )
    predicate = check_certificate(done.certificate, load_public_ref(pub))["predicate"]
    assert predicate["verification"]["keysNotFound"] == 1
    assert predicate["outcome"] == "partial" and predicate["verification"]["result"] == "failed"
    assert any(entry.startswith("key store:") for entry in predicate["incomplete"])
    assert "not verified" in predicate["sanitization"]["details"]
    hidden = {**predicate, "outcome": "complete", "incomplete": []}
    statement = json.loads(base64.b64decode(done.certificate["payload"]))
    forged = dsse_sign(IN_TOTO_TYPE, {**statement, "predicate": hidden}, load_key_pair(key_file))
    with pytest.raises(CertificateError, match="outcome is complete"):
        check_certificate(forged, load_public_ref(pub))
    forged_file = tmp_path / "forged.json"
    forged_file.write_text(json.dumps(forged))
    offline = subprocess.run(
        [sys.executable, "-m", OFFLINE, str(forged_file), "--key", str(pub)],
        capture_output=True,
        text=True,
    )
    assert offline.returncode == 1 and "outcome is complete, but it is not" in offline.stdout


def test_a_key_in_the_ledgers_own_store_is_complete(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    with Ledger(tmp_path / "l.jsonl", forget_mode="crypto-shred") as ledger:
        fact = ledger.assert_fact(**FACT, value="dana@example.org")
        done = ledger.forget(
            fact_id=fact.fact_id, actor="dpo", reason="gdpr", keep_digest=False,
            certificate=CertificateOptions(key=key),
        )  # fmt: skip
    predicate = check_certificate(done.certificate, PublicKeyRef.of(key.public_key()))["predicate"]
    assert "keysNotFound" not in predicate["verification"]
    assert predicate["outcome"] == "complete"

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


def test_a_hostile_certificate_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``certificate verify`` on a file nested deeper than Python parses (a traceback before),
    and on an envelope whose payload type holds a lone surrogate (signed bytes encoded as Node
    encodes them, U+FFFD: the signature fails instead of raising)."""
    from agent_custody_state.cli import main

    key = tmp_path / "k.pem"
    assert main(["keygen", "--out", str(key)]) == 0
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    capsys.readouterr()
    assert main(["certificate", "verify", str(deep), "--key", str(key)]) == 1
    assert capsys.readouterr().err == (
        f"error: {deep}: not JSON (JSON nested too deeply to parse)\n"
    )
    keys = load_key_pair(str(key))
    envelope = dsse_sign(IN_TOTO_TYPE, {"x": 1}, keys)
    envelope["payloadType"] = "application/vnd.in-toto+json\ud800"
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps(envelope))
    assert main(["certificate", "verify", str(odd), "--key", str(key)]) == 1
    assert "did not verify" in capsys.readouterr().out

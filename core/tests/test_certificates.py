"""Erasure certificates (docs/proofs.md, "Certificates"): the ledger's part, the stores' part,
the command line and the offline verifier.

The backends' own rule (byte scan before and after, the certificate against the stored events)
is conformance rule CE-1, run on JSONL, SQLite, PostgreSQL and memory; here: crypto-shred, stores
that fail in the ways a vendor fails, refusals that change nothing, and the two verifiers
agreeing on good and tampered input.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state import AssertRequest, Fact, Ledger, LedgerError
from agent_custody_state.keys import PublicKeyRef
from agent_custody_state.ledger.certificate import CertificateOptions
from agent_custody_state.ledger.certverify import CertificateError, check_against, check_certificate
from agent_custody_state.server.signing import generate_key_pair
from agent_custody_state.stores import StoreSet, VerifyPolicy
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore

SECRET = "dana.private@example.org"
KEY = Ed25519PrivateKey.generate()
PUBLIC = PublicKeyRef.of(KEY.public_key())


def statement_of(envelope: dict[str, Any]) -> dict[str, Any]:
    return check_certificate(envelope, PUBLIC)


def write(ledger: Ledger, value: Any = SECRET, subject: str = "acct:1") -> str:
    event = ledger.assert_fact(
        subject=subject, predicate="email", value=value, space="org", actor="a"
    )
    return event.fact.fact_id


def test_crypto_shred_is_purge_with_no_residual_windows(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.jsonl", forget_mode="crypto-shred") as ledger:
        fact = write(ledger)
        done = ledger.forget(
            fact_id=fact, actor="dpo", reason="gdpr", certificate=CertificateOptions(key=KEY)
        )
        statement = statement_of(done.certificate)
        check_against(statement, ledger.backend.stored_events())
    predicate = statement["predicate"]
    assert predicate["sanitization"]["category"] == "Purge"
    assert predicate["sanitization"]["method"] == "crypto-shred"
    assert predicate["residualWindows"] == []
    scanned = [f["path"] for f in predicate["verification"]["byteScan"]["files"]]
    assert str(tmp_path / "l.jsonl.keys") in scanned  # the key store's files too
    assert predicate["outcome"] == "complete"


def test_plain_jsonl_lists_its_residual_windows_and_is_clear(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.jsonl") as ledger:
        done = ledger.forget(
            fact_id=write(ledger), actor="dpo", reason="r", certificate=CertificateOptions(key=KEY)
        )
    predicate = statement_of(done.certificate)["predicate"]
    assert predicate["sanitization"]["category"] == "Clear"
    assert predicate["residualWindows"] and predicate["stores"] == {"covered": False, "stores": []}


def test_no_key_refuses_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        fact = write(ledger)
        before = path.read_bytes()
        with pytest.raises(LedgerError, match="no key") as caught:
            ledger.forget(fact_id=fact, actor="a", reason="r", certificate=True)
        assert caught.value.code == "no_signing_key"
        assert path.read_bytes() == before


class TimesOut(InProcessStore):
    async def remove(self, external_id: str, fact: Fact) -> None:
        raise TimeoutError("the vendor did not answer within 30 s")


class AcknowledgesOnly(InProcessStore):
    async def remove(self, external_id: str, fact: Fact) -> None:
        return None  # "deleted", says the vendor, and keeps the record


class OkForUnknownIds(InProcessStore):
    async def put(self, fact: Fact) -> str:
        await super().put(fact)
        return "mem-never-issued"  # the record lives under another id; delete of this one is "200"


@pytest.mark.parametrize("faulty", [TimesOut, AcknowledgesOnly, OkForUnknownIds])
def test_a_failing_store_makes_the_certificate_partial_never_complete(faulty: type) -> None:
    async def scenario() -> None:
        stores = StoreSet(
            [InProcessStore("good"), faulty("bad")], VerifyPolicy(attempts=2, delay=0)
        )
        with Ledger("memory:") as ledger:
            custody = Custody(ledger, stores, certificate_key=KEY)
            fact = (await custody.write(AssertRequest("acct:1", "email", SECRET, "org", "a"))).event
            done = await custody.forget(
                fact_id=fact.fact_id, actor="a", reason="r", certificate=True
            )
            predicate = statement_of(done.certificate or {})["predicate"]
            entries = {s["name"]: s for s in predicate["stores"]["stores"]}
            assert entries["good"]["verification"] == "verified"
            assert entries["bad"]["verification"] != "verified"
            assert predicate["outcome"] == "partial"
            assert any("store bad" in item for item in predicate["incomplete"])
            swept = await custody.sweep(
                before="2999-01-01T00:00:00Z", actor="a", reason="r", certificates=True
            )
            assert swept.forgotten == []

    anyio.run(scenario)


def test_sweep_certifies_each_fact_with_its_stores() -> None:
    async def scenario() -> None:
        stores = StoreSet([InProcessStore("good")], VerifyPolicy(attempts=1, delay=0))
        with Ledger("memory:") as ledger:
            custody = Custody(ledger, stores, certificate_key=KEY)
            for n in range(3):
                await custody.write(AssertRequest(f"acct:{n}", "email", f"{SECRET}{n}", "org", "a"))
            report = await custody.sweep(
                before="2999-01-01T00:00:00Z", actor="a", reason="r", certificates=True
            )
            assert len(report.forgotten) == 3
            for swept in report.forgotten:
                statement = statement_of(swept.certificate or {})
                assert statement["subject"][0]["name"] == swept.event.fact_id
                assert statement["predicate"]["outcome"] == "complete"
                assert [s["name"] for s in statement["predicate"]["stores"]["stores"]] == ["good"]
                check_against(statement, ledger.backend.stored_events())

    anyio.run(scenario)


def cli(*args: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_custody_state", *map(str, args)],
        capture_output=True,
        text=True,
    )


def offline(*args: Any) -> subprocess.CompletedProcess[str]:
    module = "agent_custody_state_conformance.offline"
    return subprocess.run(
        [sys.executable, "-m", module, *map(str, args)], capture_output=True, text=True
    )


def tampered(envelope: dict[str, Any], change: Any) -> dict[str, Any]:
    statement = json.loads(base64.b64decode(envelope["payload"]))
    change(statement["predicate"])
    payload = base64.b64encode(json.dumps(statement).encode()).decode()
    return {**envelope, "payload": payload}


def test_command_line_and_offline_verifier_agree(tmp_path: Path) -> None:
    key, pub, _ = generate_key_pair(tmp_path / "k.key")
    ledger_path = tmp_path / "l.jsonl"
    with Ledger(ledger_path) as ledger:
        fact = write(ledger)
        write(ledger, "other", "acct:2")
    cert = tmp_path / "c.json"
    done = cli(
        "forget",
        "--ledger",
        ledger_path,
        "--fact",
        fact,
        "--reason",
        "gdpr",
        "--certificate",
        cert,
        "--key",
        key,
    )
    assert done.returncode == 0, done.stderr
    again = cli(
        "forget", "--ledger", ledger_path, "--fact", fact, "--reason", "x", "--certificate", cert
    )
    assert again.returncode == 1 and "already exists" in again.stderr
    good = json.loads(cert.read_text())
    cases: dict[str, tuple[dict[str, Any], Path, bool]] = {"good": (good, ledger_path, True)}
    cases["outcome"] = (tampered(good, lambda p: p.update(outcome="partial")), ledger_path, False)
    lines = ledger_path.read_text().splitlines()
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join([lines[0].replace("acct:1", "acct:9"), *lines[1:]]) + "\n")
    cases["edited ledger"] = (good, edited, False)
    truncated = tmp_path / "truncated.jsonl"
    truncated.write_text("\n".join(lines[:-1]) + "\n")
    cases["forget removed"] = (good, truncated, False)
    for name, (envelope, ledger_file, ok) in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(envelope))
        ours = cli("certificate", "verify", path, "--key", pub, "--ledger", ledger_file)
        theirs = offline(path, "--key", pub, "--ledger", ledger_file)
        assert (ours.returncode, theirs.returncode) == ((0, 0) if ok else (1, 1)), (
            name,
            ours,
            theirs,
        )
        assert ours.stdout.startswith("ok: " if ok else "FAILED: ")
        assert theirs.stdout.startswith("ok: " if ok else "FAILED: ")


def test_offline_canonical_json_matches_the_javascript_vectors() -> None:
    from agent_custody_state_conformance.offline import canonical

    data = Path(__file__).parent / "data" / "js_canonical_vectors.json"
    cases = json.loads(data.read_text())["cases"]
    assert cases
    for case in cases:
        assert canonical(case["input"]) == case["canonical"], case


def test_verify_names_the_first_reason(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.jsonl") as ledger:
        done = ledger.forget(
            fact_id=write(ledger), actor="a", reason="r", certificate=CertificateOptions(key=KEY)
        )
    other = PublicKeyRef.of(Ed25519PrivateKey.generate().public_key())
    with pytest.raises(CertificateError, match="signature"):
        check_certificate(done.certificate, other)

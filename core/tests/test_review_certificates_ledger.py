"""Review of ``certificate verify --ledger`` and the offline verifier on ledgers: both must give
the same verdict on every ledger (docs/proofs.md: the offline verifier makes "the same checks"),
and neither may say a fact is forgotten while the ledger's file still holds its value. Also the
crypto-shred recovery that must never destroy the key of a live fact."""

from __future__ import annotations

import contextlib
import io
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_custody_state import Ledger
from agent_custody_state.cli import main as cli_main
from agent_custody_state.ledger.certificate import CertificateOptions
from agent_custody_state.server.signing import generate_key_pair
from agent_custody_state_conformance import offline

FACT = {"predicate": "email", "space": "org", "actor": "a"}
SECRET = "dana.private@example.org"


def verdicts(root: Path, certificate: dict[str, Any], ledger: Path) -> tuple[int, int]:
    """(``certificate verify``'s exit code, the offline verifier's), against ``ledger``."""
    path = root / "c.json"
    path.write_text(json.dumps(certificate), encoding="utf-8")
    args = [str(path), "--key", str(root / "k.pub"), "--ledger", str(ledger)]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return cli_main(["certificate", "verify", *args]), offline.main(args)


def _original_line(line: str) -> str:
    """An assert as the TypeScript original writes it: no chain record, salt or commitment."""
    event = json.loads(line)
    del event["chain"]
    for key in ("valueSalt", "valueCommitment"):
        event["fact"].pop(key, None)
    event["eventId"], event["fact"]["factId"] = str(uuid.uuid4()), str(uuid.uuid4())
    return json.dumps(event, separators=(",", ":"))


def mixed_ledger(root: Path, original: bool = True) -> tuple[Path, dict[str, Any], dict[str, int]]:
    """A JSONL ledger: F asserted, G asserted and forgotten, an event of the original's (unless
    not ``original``), K asserted (with a genesis covering it), F forgotten with a certificate.
    Returns the path, the certificate and the line number (0-based) of each event by name."""
    key_file, pub, _ = generate_key_pair(root / "k.key")
    Path(pub).rename(root / "k.pub")
    path = root / "l.jsonl"
    with Ledger(path) as ledger:
        f = ledger.assert_fact(subject="acct:1", value=SECRET, **FACT).fact_id
        g = ledger.assert_fact(subject="acct:2", value="kept@example.org", **FACT).fact_id
        ledger.forget(fact_id=g, actor="dpo", reason="r")
    lines = path.read_text().splitlines()
    if original:
        with path.open("a") as out:
            out.write(_original_line(lines[1]) + "\n")
    with Ledger(path) as ledger:
        ledger.assert_fact(subject="acct:3", value="later@example.org", **FACT)
        done = ledger.forget(
            fact_id=f, actor="dpo", reason="gdpr", certificate=CertificateOptions(key=key_file)
        )
    lines = path.read_text().splitlines()
    assert ('"genesis"' in lines[4]) == original
    return path, done.certificate, {"F": 0, "G": 1, "forget G": 2, "K": 3 + original}


def edited(path: Path, n: int, change: Callable[[str], str]) -> Path:
    lines = path.read_text().splitlines()
    new = change(lines[n])
    assert new != lines[n]
    lines[n] = new
    out = path.with_name(f"edited-{n}-{uuid.uuid4().hex[:6]}.jsonl")
    out.write_text("\n".join(lines) + "\n")
    return out


def test_a_ledger_the_original_wrote_to_again_verifies_with_both(tmp_path: Path) -> None:
    """Defect: the offline verifier refused every event without a chain record once the chain
    had started, though a later genesis covers them (docs/proofs.md, "Ledgers written by the
    original"): ``certificate verify`` said ok, the offline verifier FAILED."""
    path, certificate, _ = mixed_ledger(tmp_path)
    assert verdicts(tmp_path, certificate, path) == (0, 0)
    (tmp_path / "plain").mkdir()
    plain, certificate, _ = mixed_ledger(tmp_path / "plain", original=False)
    assert verdicts(tmp_path / "plain", certificate, plain) == (0, 0)


def test_edits_the_chain_verifier_catches_are_caught_offline_too(tmp_path: Path) -> None:
    """Defect: the offline verifier checked a commitment only for facts not marked forgotten,
    read the salt leniently and never matched a forgotten mark with its forget event, so it
    said ok for ledgers that ``verify`` (and ``certificate verify``) fail."""
    path, certificate, at = mixed_ledger(tmp_path, original=False)
    g_line = path.read_text().splitlines()[at["G"]]
    assert '"forgotten"' in g_line and '"value":null' in g_line

    def salt_respelled(line: str) -> str:
        salt = json.loads(line)["fact"]["valueSalt"]
        return line.replace(salt, salt[:8] + "\\n" + salt[8:])

    cases = {
        "a forgotten fact's value put back": (at["G"], lambda s: s.replace(
            '"value":null', '"value":"kept@example.org"')),
        "a forgotten mark that differs from its forget": (at["G"], lambda s: s.replace(
            '"valueDigest":"', '"valueDigest":"0')),
        "a salt spelt otherwise": (at["K"], salt_respelled),
        "a genesis in the middle of the chain": (at["forget G"], lambda s: s.replace(
            '"chain":{"seq":3,', '"chain":{"seq":3,"genesis":{"size":2,"head":"' + json.loads(
                path.read_text().splitlines()[1])["chain"]["head"] + '"},')),
    }  # fmt: skip
    for name, (n, change) in cases.items():
        assert verdicts(tmp_path, certificate, edited(path, n, change)) == (1, 1), name


def test_a_value_kept_under_a_duplicate_key_is_not_forgotten(tmp_path: Path) -> None:
    """Defect: the fact's assert rewritten with ``"value":"<secret>"`` before its
    ``"value":null`` keeps every leaf (the value is outside it) and both verifiers, reading
    the last key, said "fact forgotten", while the file holds the value and a reader taking
    the first key reads it."""
    path, certificate, at = mixed_ledger(tmp_path, original=False)

    def value_twice(line: str) -> str:
        return line.replace('"value":null', f'"value":"{SECRET}","value":null')

    kept = edited(path, at["F"], value_twice)
    assert SECRET.encode() in kept.read_bytes()
    assert verdicts(tmp_path, certificate, kept) == (1, 1)
    forget_twice = edited(path, 4, lambda s: s.replace('"kind":', '"kind":"assert","kind":', 1))
    assert verdicts(tmp_path, certificate, forget_twice) == (1, 1)


def test_a_crypto_shred_ledger_verifies_with_both(tmp_path: Path) -> None:
    """Defect: the offline verifier took a live fact's envelope for its value and FAILED every
    crypto-shred ledger ``certificate verify`` accepts (its commitment needs the key store:
    ``verify`` notes it as sealed)."""
    key_file, pub, _ = generate_key_pair(tmp_path / "k.key")
    Path(pub).rename(tmp_path / "k.pub")
    path = tmp_path / "l.jsonl"
    with Ledger(path, forget_mode="crypto-shred") as ledger:
        fact = ledger.assert_fact(subject="acct:1", value=SECRET, **FACT)
        ledger.assert_fact(subject="acct:2", value="kept@example.org", **FACT)
        done = ledger.forget(
            fact_id=fact.fact_id,
            actor="dpo",
            reason="gdpr",
            certificate=CertificateOptions(key=key_file),
        )
    assert verdicts(tmp_path, done.certificate, path) == (0, 0)

"""Third review: ``certificate verify --ledger`` and the offline verifier must give the same
verdict on every ledger (docs/proofs.md: the offline verifier applies every rule of "what
verify checks" but the checkpoints). Edits that keep every hash through canonical JSON's
many-to-one spellings (``NaN``, a number too large for a double, a key twice) were accepted
offline while the chain verifier refused them."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main as cli_main
from agent_custody_state.ledger.certificate import CertificateOptions
from agent_custody_state.server.signing import generate_key_pair
from agent_custody_state_conformance import offline

FACT: dict[str, Any] = {"predicate": "email", "space": "org", "actor": "a"}


def _ledger(root: Path) -> tuple[Path, dict[str, Any]]:
    """F asserted, K asserted (``confidence`` null, a value holding a null), L asserted, F
    forgotten with a certificate: K is none of the events a certificate check reads itself."""
    key_file, pub, _ = generate_key_pair(root / "k.key")
    Path(pub).rename(root / "k.pub")
    path = root / "l.jsonl"
    with Ledger(path) as ledger:
        f = ledger.assert_fact(subject="acct:1", value="secret@example.org", **FACT).fact_id
        ledger.assert_fact(subject="acct:3", value={"a": None}, **FACT)
        ledger.assert_fact(subject="acct:4", value="later@example.org", **FACT)
        done = ledger.forget(
            fact_id=f, actor="dpo", reason="gdpr", certificate=CertificateOptions(key=key_file)
        )
    return path, done.certificate


def _verdicts(root: Path, certificate: dict[str, Any], ledger: Path) -> tuple[int, int]:
    path = root / "c.json"
    path.write_text(json.dumps(certificate), encoding="utf-8")
    args = [str(path), "--key", str(root / "k.pub"), "--ledger", str(ledger)]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return cli_main(["certificate", "verify", *args]), offline.main(args)


EDITS = {
    "NaN for a null": ('"a":null', '"a":NaN'),
    "-Infinity for a null": ('"confidence":null', '"confidence":-Infinity'),
    "a number too large for a double": ('"a":null', '"a":1e400'),
    "an integer too large for a double": ('"a":null', '"a":' + "9" * 400),
    "a key twice, the first forged": ('"subject":"acct:3"', '"subject":"x","subject":"acct:3"'),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edit_that_keeps_every_hash_fails_both_verifiers(tmp_path: Path, edit: str) -> None:
    path, certificate = _ledger(tmp_path)
    assert _verdicts(tmp_path, certificate, path) == (0, 0)
    old, new = EDITS[edit]
    lines = path.read_text(encoding="utf-8").splitlines()
    assert old in lines[1]
    lines[1] = lines[1].replace(old, new, 1)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert _verdicts(tmp_path, certificate, path) == (1, 1)


def test_a_second_assert_of_the_forgotten_fact_holding_its_value_fails_both(
    tmp_path: Path,
) -> None:
    """Defect: both verifiers judged the first assert of the fact only. An assert of the same
    fact id appended after the forget, holding the value (as the original writes one, a later
    genesis covering it), kept the chain verifying and both said "fact forgotten", while the
    ledger's file held the value again."""
    path, certificate = _ledger(tmp_path)
    first = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    again = {k: v for k, v in first.items() if k != "chain"}
    again["eventId"] = "11111111-1111-4111-8111-111111111111"
    again["fact"] = {
        k: v
        for k, v in first["fact"].items()
        if k not in ("valueSalt", "valueCommitment", "forgotten")
    }
    again["fact"]["value"] = "secret@example.org"
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(again, separators=(",", ":")) + "\n")
    with Ledger(path) as ledger:  # a genesis covers the original's event: the chain verifies
        ledger.assert_fact(subject="acct:5", value="x", **FACT)
    assert b"secret@example.org" in path.read_bytes()
    assert _verdicts(tmp_path, certificate, path) == (1, 1)


def test_another_facts_value_copied_back_fails_both(tmp_path: Path) -> None:
    """The chain's rule (``verify``): no assert of a fact a forget event erased holds a value.
    The offline verifier applies it to every fact, not only the certified one."""
    key_file, pub, _ = generate_key_pair(tmp_path / "k.key")
    Path(pub).rename(tmp_path / "k.pub")
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        g = ledger.assert_fact(subject="acct:2", value="other@example.org", **FACT).fact_id
        f = ledger.assert_fact(subject="acct:1", value="secret@example.org", **FACT).fact_id
    before = path.read_text(encoding="utf-8").splitlines()[0]
    with Ledger(path) as ledger:
        ledger.forget(fact_id=g, actor="dpo", reason="gdpr")
        ledger.assert_fact(subject="acct:3", value="later@example.org", **FACT)
        done = ledger.forget(
            fact_id=f, actor="dpo", reason="gdpr", certificate=CertificateOptions(key=key_file)
        )
    assert _verdicts(tmp_path, done.certificate, path) == (0, 0)
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[0] = before
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert _verdicts(tmp_path, done.certificate, path) == (1, 1)

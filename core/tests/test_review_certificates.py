"""Review of the two certificate verifiers (``certificate verify`` and the offline verifier):
every certificate here is signed by the trusted key or is an edit of one, and both verifiers
must give the same verdict, never accepting a certificate that is altered or says something
the ledger does not. Each case is a defect found in review (docs/proofs.md, "Certificates").
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger
from agent_custody_state.canonical import canonical_bytes
from agent_custody_state.cli import main as cli_main
from agent_custody_state.keys import load_key_pair
from agent_custody_state.ledger.certificate import CertificateOptions
from agent_custody_state.server.signing import generate_key_pair
from agent_custody_state.signing import IN_TOTO_TYPE, pae
from agent_custody_state_conformance import offline

FACT = {"subject": "acct:1", "predicate": "email", "space": "org", "actor": "a"}


class Setup:
    """A JSONL ledger with one forgotten fact, its good certificate, the keys' files."""

    def __init__(self, root: Path, *, keep_digest: bool = True) -> None:
        self.root = root
        self.key_file, self.pub, _ = generate_key_pair(root / "k.key")
        self.pair = load_key_pair(self.key_file)
        self.ledger = root / "l.jsonl"
        with Ledger(self.ledger) as ledger:
            fact = ledger.assert_fact(**FACT, value="dana.private@example.org")
            ledger.assert_fact(**{**FACT, "subject": "acct:2"}, value="kept")
            done = ledger.forget(
                fact_id=fact.fact_id,
                actor="dpo",
                reason="gdpr",
                keep_digest=keep_digest,
                certificate=CertificateOptions(key=self.key_file),
            )
        self.fact_id = fact.fact_id
        self.good: dict[str, Any] = done.certificate
        self.statement: dict[str, Any] = json.loads(base64.b64decode(self.good["payload"]))

    def signed(self, body: bytes, payload_type: str = IN_TOTO_TYPE) -> dict[str, Any]:
        """An envelope over exactly ``body``, signed by the trusted key."""
        sig = self.pair.private_key.sign(pae(payload_type, body))
        return {
            "payloadType": payload_type,
            "payload": base64.b64encode(body).decode("ascii"),
            "signatures": [{"keyid": self.pair.keyid, "sig": base64.b64encode(sig).decode()}],
        }

    def resigned(self, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        statement = json.loads(json.dumps(self.statement))
        change(statement)
        return self.signed(canonical_bytes(statement))

    def verdicts(
        self, envelope: dict[str, Any] | str, ledger: Path | None = None
    ) -> tuple[int, int]:
        """(``certificate verify``'s exit code, the offline verifier's)."""
        text = envelope if isinstance(envelope, str) else json.dumps(envelope)
        path = self.root / "c.json"
        path.write_text(text, encoding="utf-8")
        extra = ["--ledger", str(ledger)] if ledger is not None else []
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            ours = cli_main(["certificate", "verify", str(path), "--key", str(self.pub), *extra])
            theirs = offline.main([str(path), "--key", str(self.pub), *extra])
        return ours, theirs


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


def test_the_good_certificate_verifies_with_both(setup: Setup) -> None:
    assert setup.verdicts(setup.good) == (0, 0)
    assert setup.verdicts(setup.good, setup.ledger) == (0, 0)


def test_another_payload_type_is_refused_by_both(setup: Setup) -> None:
    """Defect: the offline verifier never looked at ``payloadType``, so a statement our key
    signed under another DSSE type (what it signs as results, say) passed as a certificate."""
    body = base64.b64decode(setup.good["payload"])
    for kind in ("application/json", "application/vnd.in-toto+json; x=1", ""):
        assert setup.verdicts(setup.signed(body, kind), setup.ledger) == (1, 1), kind


def test_a_payload_in_non_canonical_base64_is_refused_by_both(setup: Setup) -> None:
    """Defect: both decoded the payload leniently, so a certificate file whose payload text was
    altered (bytes appended after the padding, characters inserted, URL-safe letters, padding
    dropped) still verified: another base64 decoder reads other bytes from it."""
    text = setup.good["payload"]
    padded = text.endswith("=")
    edits = {
        "junk after the padding": text + ("QUJD" if padded else "=QUJD"),
        "a line break inside": text[:8] + "\n" + text[8:],
        "a character outside base64": text[:8] + "!" + text[8:],
        "no padding": text.rstrip("=") if padded else text + "=",
        "url-safe letters": text.replace("+", "-").replace("/", "_"),
    }
    for name, edited in edits.items():
        if edited == text:
            continue
        assert setup.verdicts({**setup.good, "payload": edited}) == (1, 1), name


def test_a_signature_in_non_canonical_base64_is_refused_by_both(setup: Setup) -> None:
    entry = setup.good["signatures"][0]
    for edited in (entry["sig"] + "AAAA", entry["sig"][:10] + " " + entry["sig"][10:]):
        envelope = {**setup.good, "signatures": [{**entry, "sig": edited}]}
        assert setup.verdicts(envelope) == (1, 1), edited


def test_duplicate_keys_in_the_statement_are_refused_by_both(setup: Setup) -> None:
    """Defect: a signed statement with a key twice (``predicateType`` first another type, then
    ours) verified with both, which read the last; a reader taking the first reads another
    statement from the same signed bytes."""
    body = canonical_bytes(setup.statement).decode("utf-8")
    twice = body.replace(
        '"predicateType":', '"predicateType":"https://example.org/other","predicateType":', 1
    )
    assert setup.verdicts(setup.signed(twice.encode("utf-8")), setup.ledger) == (1, 1)
    nested = body.replace('"outcome":', '"outcome":"partial","outcome":', 1)
    assert setup.verdicts(setup.signed(nested.encode("utf-8")), setup.ledger) == (1, 1)


def test_duplicate_keys_in_the_envelope_are_refused_by_both(setup: Setup) -> None:
    """The envelope file itself: a second ``payload`` hides the one a first-wins reader sees."""
    other = base64.b64encode(b'{"_type":"not the signed statement"}').decode()
    text = '{"payload": ' + json.dumps(other) + ", " + json.dumps(setup.good)[1:]
    assert json.loads(text) == setup.good  # what a last-wins reader reads
    assert setup.verdicts(text) == (1, 1)


def test_payload_that_is_not_strict_json_is_refused_by_both(setup: Setup) -> None:
    """Signed bytes the two verifiers read differently: invalid UTF-8 (ours replaced it with
    U+FFFD, the offline verifier refused it) and ``NaN`` (the offline verifier read it)."""
    body = canonical_bytes(setup.statement)
    bad_utf8 = body.replace(b'"gdpr"', b'"gd\xffpr"', 1)
    assert bad_utf8 != body
    assert setup.verdicts(setup.signed(bad_utf8)) == (1, 1)
    nan = body.replace(b'"reason":"gdpr"', b'"reason":NaN', 1)
    assert nan != body
    assert setup.verdicts(setup.signed(nan)) == (1, 1)


def test_statement_shapes_get_the_same_verdict(setup: Setup) -> None:
    """Signed statements of the wrong shape: both refuse (the offline verifier accepted a
    partial outcome naming nothing incomplete, a subject that is not {name, digest}, and a
    zero-size head that is not the zero head; ours crashed on a non-object section)."""
    changes: dict[str, Callable[[dict[str, Any]], None]] = {
        "partial, nothing incomplete": lambda st: st["predicate"].update(outcome="partial"),
        "subject without digest": lambda st: st["subject"][0].pop("digest"),
        "subject not an object": lambda st: st.update(subject=["x"]),
        "sanitization not an object": lambda st: st["predicate"].update(sanitization="x"),
        "verification not an object": lambda st: st["predicate"].update(verification=[]),
        "stores not an object": lambda st: st["predicate"].update(stores=[]),
        "a scan file unread, complete": lambda st: st["predicate"]["verification"]["byteScan"][
            "files"
        ].append({"path": "x", "error": "denied"}),
        "before at 0, not the zero head": lambda st: st["predicate"]["chain"]["before"].update(
            size=0
        ),
        "size not an integer": lambda st: st["predicate"]["chain"]["after"].update(size="3"),
    }
    for name, change in changes.items():
        assert setup.verdicts(setup.resigned(change), setup.ledger) == (1, 1), name


def test_a_subject_digest_that_does_not_match_is_refused_without_a_digest_kept(
    tmp_path: Path,
) -> None:
    """Defect: with no digest kept (``digestKind`` none) neither verifier compared the subject's
    digest with anything: a certificate naming any digest verified against the ledger. The
    subject of such a forget is the assert's ``valueCommitment``."""
    setup = Setup(tmp_path, keep_digest=False)
    assert setup.statement["subject"][0]["digest"].keys() == {"valueCommitment"}
    assert setup.verdicts(setup.good, setup.ledger) == (0, 0)
    for digest in ({"sha256": "00" * 32}, {"valueCommitment": "00" * 32}, {}):
        envelope = setup.resigned(lambda st, d=digest: st["subject"][0].update(digest=d))
        assert setup.verdicts(envelope, setup.ledger) == (1, 1), digest

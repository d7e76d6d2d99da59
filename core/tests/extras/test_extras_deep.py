"""Deep JSON that is trusted: a signed file whose signature verifies, a receipt signed by the
gateway inside a pack, a pack about to be signed. Its signer does not make it readable: JSON
nested more than ``MAX_DEPTH`` levels exhausted Python's recursion while digesting it (a
RecursionError traceback), or, deeper than ``json.loads`` goes, was reported as a bad signature.
Each is now a one-line error or a failed check, built here as text up to 100,000 levels."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import worked
from conftest import Cli
from gatewaysim import seeded
from test_extras_hostile import keys, nested, one_line
from worked import F1, R1, R3

from agent_custody_state.extras.jsview import MAX_DEPTH
from agent_custody_state.extras.pack import sign_pack
from agent_custody_state.extras.signed import SignedTooDeep, sign_statement
from agent_custody_state.extras.verify import RECEIPT_PREDICATE_TYPE as RECEIPT_TYPE
from agent_custody_state.extras.verify import VerifyOptions, verify_bundle
from agent_custody_state.keys import KeyPair, load_key_pair, load_public_ref
from agent_custody_state.signing import IN_TOTO_TYPE, STATEMENT_TYPE, pae

TYPES = {
    "pack": "https://agent-custody.dev/custody-pack/v0.1",
    "explain": "https://agent-custody.dev/action-pack/v0.1",
    "eval": "https://agent-custody.dev/eval-report/v0.1",
}
DEEP = f"nested more than {MAX_DEPTH} levels deep"


def deep_text(levels: int) -> str:
    return "[" * levels + "]" * levels


def signed(payload: str, key: KeyPair) -> dict[str, Any]:
    """A DSSE envelope over the payload text as given (json.dumps could not write it)."""
    body = payload.encode()
    sig = key.private_key.sign(pae(IN_TOTO_TYPE, body))
    return {
        "payloadType": IN_TOTO_TYPE,
        "payload": base64.b64encode(body).decode(),
        "signatures": [{"keyid": key.keyid, "sig": base64.b64encode(sig).decode()}],
    }


def statement(predicate_type: str, predicate: str) -> str:
    return (
        f'{{"_type":"{STATEMENT_TYPE}","subject":[{{"name":"n","digest":{{"sha256":"0"}}}}],'
        f'"predicateType":"{predicate_type}","predicate":{predicate}}}'
    )


@pytest.mark.parametrize("levels", [400, 100_000])
@pytest.mark.parametrize("command", list(TYPES))
def test_a_signed_file_nested_too_deeply_is_a_one_line_error(
    fixture18: worked.Worked, cli: Cli, command: str, levels: int
) -> None:
    w = fixture18
    inner = deep_text(levels)
    predicate = f'{{"factId":"f","receiptId":"r","report":{inner},"history":{inner}}}'
    out = w.root / "signed.json"
    out.write_text(
        json.dumps(signed(statement(TYPES[command], predicate), load_key_pair(w.pack_key)))
    )
    receipt_keys = keys(w) if command != "eval" else []
    run = cli(command, "--verify", out, "--key", w.pack_pub, *receipt_keys)
    assert (run.code, run.out) == (1, "")
    assert one_line(run.err) == f"error: {out}: the signed payload is not JSON ({DEEP})\n"


def test_a_pack_as_deep_as_allowed_still_verifies(fixture18: worked.Worked, cli: Cli) -> None:
    """The statement may nest ``MAX_DEPTH`` levels: statement, predicate, ``holds``, then the
    rest; one more is refused."""
    w = fixture18
    key = load_key_pair(w.pack_key)
    out = w.root / "fact.pack.json"
    for extra, code in ((0, None), (1, 1)):
        predicate = f'{{"factId":"f","holds":{deep_text(MAX_DEPTH - 2 + extra)}}}'
        out.write_text(json.dumps(signed(statement(TYPES["pack"], predicate), key)))
        run = cli("pack", "--verify", out, "--key", w.pack_pub)
        if code is None:
            assert run.code == 1 and run.err == "" and "FAIL  pack digest" in run.out
            assert "PASS  pack signature" in run.out and "\nRESULT: NOT VERIFIED\n" in run.out
        else:
            assert (run.code, run.out) == (1, "") and DEEP in one_line(run.err)


@pytest.mark.parametrize("levels", [400, 100_000])
def test_a_gateway_signed_receipt_too_deep_inside_a_pack_fails_its_check(
    fixture18: worked.Worked, cli: Cli, levels: int
) -> None:
    w = fixture18
    out = w.root / "fact.pack.json"
    assert cli("pack", "--ledger", w.ledger, "--receipts", w.receipts, "--fact", F1,
               "--out", out, "--sign", w.pack_key).code == 0  # fmt: skip
    pack = json.loads(base64.b64decode(json.loads(out.read_text())["payload"]))["predicate"]
    receipt = pack["receipts"][R1]
    predicate = f'{{"issuer":{{"kind":"gateway"}},"request":{{"args":{deep_text(levels)}}}}}'
    receipt["envelope"] = signed(statement(RECEIPT_TYPE, predicate), seeded(1))
    result = verify_bundle(receipt, VerifyOptions([load_public_ref(w.gateway_pub)]))
    assert [c.line() for c in result.checks] == [
        f"FAIL  receipt signature (issuer key)  (payload is not JSON ({DEEP}))"
    ]
    out.write_text(json.dumps(sign_pack(pack, load_key_pair(w.pack_key))))
    run = cli("pack", "--verify", out, "--key", w.pack_pub, *keys(w), "--json")
    assert run.code == 1 and run.err == ""
    check = next(
        c for c in json.loads(run.out)["checks"] if c["name"] == f"receipt {R1[:8]} verifies"
    )
    assert check == {"name": f"receipt {R1[:8]} verifies", "ok": False,
                     "detail": "receipt signature (issuer key)"}  # fmt: skip
    run = cli("explain", "--receipts", w.receipts, "--receipt", R1, *keys(w))
    assert run.code == 0  # the receipts on disk are untouched


def test_nothing_is_signed_that_could_not_be_read_back(fixture18: worked.Worked, cli: Cli) -> None:
    """A receipt file may nest ``MAX_DEPTH`` levels (an unsigned member); inside an action pack
    it is deeper than that: refused before anything is printed or written."""
    w = fixture18
    path = w.receipts / f"{R3}.json"
    bundle = json.loads(path.read_text())
    bundle["envelope"]["signatures"][0]["note"] = nested(MAX_DEPTH - 4)
    path.write_text(json.dumps(bundle))
    out = w.root / "action.pack.json"
    run = cli("explain", "--receipts", w.receipts, "--receipt", R3, "--out", out,
              "--sign", w.pack_key)  # fmt: skip
    assert (run.code, run.out) == (1, "") and not out.exists()
    assert one_line(run.err) == (f"error: action-pack:{R3}: the statement to sign is {DEEP}\n")
    with pytest.raises(SignedTooDeep, match=DEEP):
        sign_statement("x", "t", {"a": nested(100_000 // 100)}, load_key_pair(w.pack_key))


def test_a_receipts_directory_nested_100000_levels(fixture18: worked.Worked, cli: Cli) -> None:
    """Files and payloads deeper than ``json.loads`` goes are skipped by every command."""
    w = fixture18
    (w.receipts / "deep.json").write_text(deep_text(100_000))
    rid = "44444444-4444-4444-8444-444444444444"
    unsigned = {"payload": base64.b64encode(deep_text(100_000).encode()).decode()}
    (w.receipts / f"{rid}.json").write_text(json.dumps({"envelope": unsigned}))
    ledger = ["--ledger", str(w.ledger)]
    run = cli("blast", *ledger, "--receipts", w.receipts, "--fact", F1)
    assert run.code == 0 and "1 call(s) made after the agent was shown it:" in run.out
    run = cli("explain", "--receipts", w.receipts, "--receipt", rid, *keys(w))
    assert (run.code, run.out) == (1, "")
    assert one_line(run.err).endswith(f"the envelope payload is not JSON ({DEEP})\n")
    out = w.root / "fact.pack.json"
    assert cli("pack", *ledger, "--receipts", w.receipts, "--fact", F1, "--out", out,
               "--sign", w.pack_key).code == 0  # fmt: skip
    assert cli("pack", "--verify", out, "--key", w.pack_pub, *keys(w)).code == 0
    run = cli("review", "--receipts", w.receipts, *keys(w), "--out", w.root / "site")
    assert run.code == 0 and run.out.startswith("wrote 3 receipt page(s)")
    scenarios = w.root / "s.json"
    scenarios.write_text(deep_text(100_000))
    run = cli("eval", "--scenarios", scenarios)
    assert one_line(run.err) == f"error: scenario file {scenarios}: not JSON ({DEEP})\n"

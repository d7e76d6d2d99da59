"""``explain`` on receipts of a real memory server (SPEC-EXTRAS 8, explain): the pack, the ten
answers, the signed action pack and its verification, tampering, retraction, the CLI."""

from __future__ import annotations

import base64
import copy
import json
import re
import shutil
from pathlib import Path

import pytest
import scenarios
from conftest import Cli

from agent_custody_state.extras.actionpack import sign_action_pack, verify_action_pack
from agent_custody_state.extras.explain import build_action_pack, format_explain
from agent_custody_state.extras.verify import VerifyOptions, verify_bundle
from agent_custody_state.keys import load_key_pair, load_public_ref
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.signing import IN_TOTO_TYPE, dsse_sign


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> scenarios.Built:
    return scenarios.explain_scenario(tmp_path_factory.mktemp("explain"))


@pytest.fixture
def case(built: scenarios.Built, tmp_path: Path) -> scenarios.Built:
    """A private copy: some tests change the ledger or the receipts."""
    shutil.copytree(built.root, tmp_path / "case")
    root = tmp_path / "case"
    keys = {k: root / "keys" / v.name for k, v in built.keys.items()}
    return scenarios.Built(
        root, root / "receipts", root / "ledger.jsonl", keys, built.ids, built.facts
    )


def receipt_keys(b: scenarios.Built) -> VerifyOptions:
    return VerifyOptions(
        [load_public_ref(b.keys["gateway.pub"])], [load_public_ref(b.keys["principal.pub"])]
    )


def test_the_pack_of_the_first_write(built: scenarios.Built) -> None:
    with Ledger(built.ledger) as ledger:
        pack = build_action_pack(built.receipts, built.ids["write"], ledger)
    assert list(pack) == [
        "version",
        "generatedAt",
        "receiptId",
        "receipt",
        "consumed",
        "written",
        "status",
        "downstream",
        "receipts",
        "missingReceipts",
    ]
    assert [f["factId"] for f in pack["written"]] == [built.facts["write"]]
    assert pack["status"] == {built.facts["write"]: "believed"}
    assert [r["tool"] for r in pack["downstream"]["receipts"]] == ["memory.write"]
    assert [f["factId"] for f in pack["downstream"]["derivedFacts"]] == [built.facts["derive"]]
    assert len(pack["downstream"]["stillBelieved"]) == 1 and pack["missingReceipts"] == []
    assert sorted(pack["receipts"]) == [built.ids["derive"]]
    text = format_explain(pack, verify_bundle(pack["receipt"], receipt_keys(built)), True)
    patterns = [
        r"^WHO\s+support-agent \(attested, named in a signed grant\)",
        r"WHO AUTHORIZED IT\s+user_456, grant signed by key",
        r"WHAT WAS ALLOWED\s+tools memory.write, memory.read, memory.retract",
        r"WHAT IT DID\s+memory.write .*-> executed",
        r"authorization committed as leaf \d+, before the call was forwarded",
        r"the upstream's own signature over the result is embedded",
        r"CAN I VERIFY IT\s+VERIFIED, 21 checks",
        r"DID ANYTHING DEPEND ON THIS\s+1 belief\(s\) written in this call, 1 later call\(s\) made "
        r"after seeing them, 1 belief\(s\) derived",
        r"WHAT NEEDS REVERSAL\s+2 belief\(s\) still believed, and 1 later call\(s\) to review",
    ]
    position = 0
    for pattern in patterns:
        found = re.compile(pattern, re.M).search(text, position)
        assert found, (pattern, text)
        position = found.end()


def test_without_a_ledger(built: scenarios.Built) -> None:
    text = format_explain(build_action_pack(built.receipts, built.ids["write"]), None, False)
    assert re.search(r"DID ANYTHING DEPEND ON THIS\s+unknown without a ledger", text)
    assert re.search(r"CAN I VERIFY IT\s+not checked here", text)


def test_the_signed_pack_and_tampering(case: scenarios.Built) -> None:
    signer = load_key_pair(case.keys["pack.key"])
    pack_keys = [load_public_ref(case.keys["pack.pub"])]
    with Ledger(case.ledger) as ledger:
        pack = build_action_pack(case.receipts, case.ids["write"], ledger)
    result = verify_action_pack(sign_action_pack(pack, signer), pack_keys, receipt_keys(case))
    assert result.ok and [c for c in result.checks if not c.ok] == []
    assert result.receipt is not None and result.receipt.ok
    assert not verify_action_pack(sign_action_pack(pack, signer), pack_keys).ok
    touched = copy.deepcopy(pack)
    bundle = touched["receipts"][case.ids["derive"]]
    statement = json.loads(base64.b64decode(bundle["envelope"]["payload"]))
    statement["predicate"]["request"]["args"]["value"] = 99
    bundle["envelope"]["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    result = verify_action_pack(sign_action_pack(touched, signer), pack_keys, receipt_keys(case))
    failed = [c.name for c in result.checks if not c.ok]
    assert failed == [f"downstream receipt {case.ids['derive'][:8]} verifies"]
    # A pack whose statement was changed after signing fails its own signature.
    envelope = sign_action_pack(pack, signer)
    forged = dsse_sign(
        IN_TOTO_TYPE,
        json.loads(base64.b64decode(envelope["payload"])),
        load_key_pair(case.keys["gateway.key"]),
    )
    assert verify_action_pack(forged, pack_keys).checks[0].line().startswith("FAIL  pack signature")


def test_after_the_derived_fact_is_retracted(case: scenarios.Built) -> None:
    with Ledger(case.ledger) as ledger:
        ledger.retract(
            fact_id=case.facts["derive"], actor="user:admin", reason="derived from a bad plan"
        )
        pack = build_action_pack(case.receipts, case.ids["write"], ledger)
    assert pack["downstream"]["stillBelieved"] == []
    assert re.search(
        r"WHAT NEEDS REVERSAL\s+1 belief\(s\) still believed", format_explain(pack, None, True)
    )


def test_cli(case: scenarios.Built, cli: Cli, tmp_path: Path) -> None:
    base = ["explain", "--receipts", case.receipts, "--receipt", case.ids["write"]]
    keys = case.flags("gateway.pub", "principal.pub")
    run = cli(*base, "--ledger", case.ledger, *keys)
    assert run.code == 0 and re.search(r"CAN I VERIFY IT\s+VERIFIED", run.out)
    out = tmp_path / "action.json"
    run = cli(*base, "--ledger", case.ledger, "--out", out, "--sign", case.keys["pack.key"])
    assert run.code == 0 and run.err == f"signed action pack written to {out}\n"
    run = cli("explain", "--verify", out, "--key", case.keys["pack.pub"], *keys)
    assert (
        run.code == 0
        and "RESULT: VERIFIED" in run.out
        and re.search(r"WHO\s+support-agent", run.out)
    )
    run = cli("explain", "--verify", out, "--key", case.keys["pack.pub"], *keys, "--json")
    data = json.loads(run.out)
    assert (
        run.code == 0
        and list(data) == ["ok", "checks", "pack", "receipt"]
        and data["receipt"]["ok"]
    )
    run = cli(*base)
    assert run.code == 0 and "unknown without a ledger" in run.out
    run = cli(*base, "--ledger", case.ledger, "--json", *keys)
    data = json.loads(run.out)
    assert list(data) == ["pack", "verification"] and data["verification"]["ok"] is True
    assert len(data["verification"]["checks"]) == 21
    # A receipt that fails verification exits 1; so does a pack with a downstream receipt missing.
    run = cli(*base, "--issuer-key", case.keys["principal.pub"])
    assert (
        run.code == 1
        and "CAN I VERIFY IT              NOT VERIFIED: receipt signature (issuer key)" in run.out
    )
    # A bundle kept under another file name is seen by the walk but cannot be put in the pack.
    (case.receipts / f"{case.ids['derive']}.json").rename(case.receipts / "kept-aside.json")
    run = cli(*base, "--ledger", case.ledger, "--json")
    assert run.code == 1 and json.loads(run.out)["pack"]["missingReceipts"] == [case.ids["derive"]]

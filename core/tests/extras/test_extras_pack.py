"""``pack`` on receipts of a real memory server (SPEC-EXTRAS 8, pack): a fact written, read, built
on, held, released and forgotten, all through the gateway."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path

import pytest
import scenarios
from conftest import Cli

from agent_custody_state.extras.pack import build_pack, format_pack, sign_pack, verify_pack
from agent_custody_state.extras.verify import VerifyOptions
from agent_custody_state.keys import load_key_pair, load_public_ref
from agent_custody_state.ledger.ledger import Ledger


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> scenarios.Built:
    return scenarios.pack_scenario(tmp_path_factory.mktemp("pack"))


@pytest.fixture(scope="module")
def pack(built: scenarios.Built) -> dict:
    with Ledger(built.ledger) as ledger:
        return build_pack(ledger, built.receipts, built.facts["write"])


def keys(b: scenarios.Built) -> VerifyOptions:
    return VerifyOptions(
        [load_public_ref(b.keys["gateway.pub"])], [load_public_ref(b.keys["principal.pub"])]
    )


def test_build(built: scenarios.Built, pack: dict) -> None:
    assert list(pack) == [
        "version",
        "generatedAt",
        "factId",
        "fact",
        "history",
        "receipts",
        "missingReceipts",
        "blast",
        "forget",
        "holds",
    ]
    assert [e["kind"] for e in pack["history"]] == ["assert", "hold", "release", "forget"]
    assert pack["missingReceipts"] == []
    assert pack["forget"]["receiptId"] == built.ids["forget"]
    assert pack["forget"]["verification"] == {} and pack["forget"]["removedFrom"] == []
    assert [f["predicate"] for f in pack["blast"]["derivedFacts"]] == ["tier"]
    assert len(pack["receipts"]) >= 5 and pack["fact"]["value"] is None
    assert pack["forget"]["event"]["digestKind"] == "sha256"
    assert [e["kind"] for e in pack["holds"]] == ["hold", "release"]
    lines = format_pack(pack).splitlines()
    assert (
        lines[0]
        == f"fact {built.facts['write']}: person:1 email = (erased) (space team:support, by support-agent, attested)"
    )
    assert lines[1] == "history: assert → hold → release → forget"
    assert lines[2] == "receipts in pack: 5"
    assert (
        lines[3]
        == "holds: hold by support-agent (hold for counsel); release by support-agent (release for counsel)"
    )
    assert lines[4].startswith("forgotten at ") and lines[4].endswith(
        f"; receipt {built.ids['forget'][:8]}; stores: "
    )
    assert lines[5] == "blast radius: 4 later call(s), 1 derived belief(s), 1 still believed"


def test_verify(built: scenarios.Built, pack: dict) -> None:
    signer = load_key_pair(built.keys["pack.key"])
    pack_keys = [load_public_ref(built.keys["pack.pub"])]
    envelope = sign_pack(pack, signer)
    result = verify_pack(envelope, pack_keys, keys(built))
    assert result.ok, [c.line() for c in result.checks if not c.ok]
    names = [c.name for c in result.checks]
    assert names[:4] == ["pack signature", "pack type", "pack digest", "no receipts missing"]
    assert names[-1] == "forget receipt names this fact and records the erasure"
    assert "forget event cites a receipt in the pack" in names
    assert not verify_pack(envelope, pack_keys).ok
    touched = copy.deepcopy(pack)
    bundle = touched["receipts"][built.ids["hold"]]
    statement = json.loads(base64.b64decode(bundle["envelope"]["payload"]))
    statement["predicate"]["request"]["args"]["reason"] = "no reason"
    bundle["envelope"]["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    failed = [
        c.name
        for c in verify_pack(sign_pack(touched, signer), pack_keys, keys(built)).checks
        if not c.ok
    ]
    assert failed == [f"receipt {built.ids['hold'][:8]} verifies"]
    first = verify_pack(envelope, [load_public_ref(built.keys["gateway.pub"])]).checks[0]
    assert first.name == "pack signature" and not first.ok
    # A forget receipt that is absent from the pack is named.
    gone = copy.deepcopy(pack)
    del gone["receipts"][built.ids["forget"]]
    check = verify_pack(sign_pack(gone, signer), pack_keys, keys(built)).checks[-1]
    assert (check.ok, check.detail) == (False, "forget receipt not in the pack")


def test_cli(built: scenarios.Built, cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "person.pack.json"
    run = cli(
        "pack",
        "--ledger",
        built.ledger,
        "--receipts",
        built.receipts,
        "--fact",
        built.facts["write"],
        "--out",
        out,
        "--sign",
        built.keys["pack.key"],
    )
    assert (
        run.code == 0 and "forgotten at" in run.out and run.err == f"signed pack written to {out}\n"
    )
    assert (out.stat().st_mode & 0o777) == 0o600
    run = cli(
        "pack",
        "--verify",
        out,
        "--key",
        built.keys["pack.pub"],
        *built.flags("gateway.pub", "principal.pub"),
    )
    assert run.code == 0 and "RESULT: VERIFIED" in run.out
    assert run.out.split("RESULT: VERIFIED\n\n")[1].startswith(
        f"fact {built.facts['write']}: person:1 email = (erased)"
    )
    run = cli("pack", "--verify", out, "--key", built.keys["pack.pub"])
    assert run.code == 1 and "RESULT: NOT VERIFIED" in run.out
    run = cli("pack", "--verify", out, "--key", built.keys["gateway.pub"], "--json")
    data = json.loads(run.out)
    assert run.code == 1 and data["pack"] is None and data["checks"][0]["name"] == "pack signature"

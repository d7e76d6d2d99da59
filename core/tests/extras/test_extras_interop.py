"""Signed by us, verified by the original's rules, and the other way round.

``data/upstream_vectors.json`` holds the worked fixture's action pack, custody pack and eval
report signed by ``data/upstream_rules.js`` (Node's crypto, base64 and JSON; regenerated with
``data/make_upstream_vectors.py``). Ed25519 is deterministic, so our signer must reproduce those
envelopes byte for byte and our verifiers must accept them. When ``node`` is on PATH the same
rules also run live: Node verifies what we sign and write, and reads our pretty files back to the
same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import upstream
import worked
from conftest import Cli

from agent_custody_state.extras.actionpack import verify_action_pack
from agent_custody_state.extras.evalfile import verify_report
from agent_custody_state.extras.pack import verify_pack
from agent_custody_state.extras.signed import sign_statement
from agent_custody_state.extras.verify import VerifyOptions
from agent_custody_state.keys import load_key_pair, load_public_ref

live = pytest.mark.skipif(not upstream.have_node(), reason=upstream.NO_NODE)


@pytest.fixture(scope="module")
def vectors() -> dict:
    return dict(json.loads(upstream.VECTORS.read_text()))


def test_the_committed_inputs_are_what_we_build(fixture18: worked.Worked, vectors: dict) -> None:
    assert upstream.signed_items(fixture18) == vectors["items"]


def test_we_sign_exactly_as_the_original(fixture18: worked.Worked, vectors: dict) -> None:
    key = load_key_pair(fixture18.pack_key)
    for item, theirs in zip(vectors["items"], vectors["envelopes"], strict=True):
        ours = sign_statement(
            item["subject"],
            item["predicateType"],
            item["predicate"],
            key,
            digest_over=item.get("digestOver"),
        )
        assert ours == theirs, item["kind"]


def test_we_verify_what_the_original_signed(fixture18: worked.Worked, vectors: dict) -> None:
    pack_keys = [load_public_ref(fixture18.pack_pub)]
    receipt_keys = VerifyOptions(
        [load_public_ref(fixture18.gateway_pub)], [load_public_ref(fixture18.principal_pub)]
    )
    action, custody, report = vectors["envelopes"]
    result = verify_action_pack(action, pack_keys, receipt_keys)
    assert result.ok and len(result.checks) == 8
    result = verify_pack(custody, pack_keys, receipt_keys)
    assert result.ok, [c.line() for c in result.checks]
    predicate, keyid, error = verify_report(report, pack_keys)
    assert error == "" and keyid == worked.PACK_KEYID and predicate["ranAt"] == upstream.AT


@live
def test_the_original_verifies_what_we_sign_and_write(
    fixture18: worked.Worked, cli: Cli, tmp_path: Path
) -> None:
    action, custody, report = (
        tmp_path / "action.json",
        tmp_path / "custody.json",
        tmp_path / "report.json",
    )
    common = ["--receipts", fixture18.receipts]
    assert (
        cli(
            "explain",
            *common,
            "--receipt",
            worked.R1,
            "--ledger",
            fixture18.ledger,
            "--out",
            action,
            "--sign",
            fixture18.pack_key,
        ).code
        == 0
    )
    assert (
        cli(
            "pack",
            *common,
            "--ledger",
            fixture18.ledger,
            "--fact",
            worked.F1,
            "--out",
            custody,
            "--sign",
            fixture18.pack_key,
        ).code
        == 0
    )
    assert cli("eval", "--sign", fixture18.pack_key, "--out", report).code == 0
    json_outputs = [
        cli(
            "blast", *common, "--ledger", fixture18.ledger, "--fact", worked.F1, "--json"
        ).out.removesuffix("\n"),
        cli(
            "explain", *common, "--receipt", worked.R3, "--ledger", fixture18.ledger, "--json"
        ).out.removesuffix("\n"),
        cli("eval", "--baseline", "--json").out.removesuffix("\n"),
    ]
    files = [action, custody, report]
    answer = upstream.node(
        {
            "pubs": [fixture18.pack_pub.read_text(), fixture18.gateway_pub.read_text()],
            "verify": [
                {"kind": kind, "envelope": json.loads(path.read_text())}
                for kind, path in zip(
                    ("action-pack", "custody-pack", "eval-report"), files, strict=True
                )
            ],
            "bundles": [
                json.loads(p.read_text()) for p in sorted(fixture18.receipts.glob("*.json"))
            ],
            "pretty": [p.read_text() for p in files]
            + [p.read_text() for p in sorted(fixture18.receipts.glob("*.json"))]
            + json_outputs,
        }
    )
    assert [v["ok"] for v in answer["verified"]] == [True, True, True], answer["verified"]
    assert [v["keyid"] for v in answer["verified"]] == [worked.PACK_KEYID] * 3
    assert answer["bundles"] == [{"signature": True, "inclusion": True}] * 3
    assert all(answer["pretty"]) and len(answer["pretty"]) == 9


@live
def test_we_verify_what_the_original_signs_now(
    fixture18: worked.Worked, cli: Cli, tmp_path: Path
) -> None:
    items = upstream.signed_items(fixture18)
    answer = upstream.node(
        {
            "key": fixture18.pack_key.read_text(),
            "sign": [{k: v for k, v in i.items() if k != "kind"} for i in items],
        }
    )
    keys = [
        "--key",
        fixture18.pack_pub,
        "--issuer-key",
        fixture18.gateway_pub,
        "--principal-key",
        fixture18.principal_pub,
    ]
    for command, envelope in zip(("explain", "pack", "eval"), answer["signed"], strict=True):
        path = tmp_path / f"{command}.json"
        path.write_text(json.dumps(envelope))
        run = cli(command, "--verify", path, *(keys if command != "eval" else keys[:2]))
        assert run.code == 0, run.out
        assert "RESULT: VERIFIED" in run.out or run.out.startswith(
            "VERIFIED  signed by 8cef065b7af8"
        )
    # Node's verifier refuses what another key signed, as ours does.
    refused = upstream.node(
        {
            "pubs": [fixture18.gateway_pub.read_text()],
            "verify": [{"kind": "eval-report", "envelope": answer["signed"][2]}],
        }
    )
    assert refused["verified"] == [
        {"ok": False, "error": "no trusted key matches keyids [8cef065b7af8]"}
    ]

"""The worked fixture of SPEC-EXTRAS 1.8: our bundles reproduce upstream's vectors byte for byte,
and every output upstream printed for them is printed here, through the command line."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest
import worked
from conftest import Cli
from gatewaysim import statement_bytes
from worked import F1, F2, R1, R2, R3

from agent_custody_state.extras.jsview import pretty
from agent_custody_state.extras.verify import VerifyOptions, verify_bundle
from agent_custody_state.keys import load_public_ref

LEAF = {
    R1: "98292b49647d9ee82af1b37595ff0702801e2ed59d86a3360ed062976110ea0b",
    R2: "f41724f18f25586527a6d749b9562840357b2aabe17cbd9fa84fa038db76a99b",
    R3: "a874302b30182ec4e0be2aa9b6565ecff2c839a03d07d4ba34869ff5f16b0ce8",
}
ROOT = {
    R1: LEAF[R1],
    R2: "8373379ad2f6cf799b48233d9eb9f54da7bdb2a386e2b0b6797838dd68ebeffc",
    R3: "436441a4fa7eb06479b9f7b4f0b77ca1257b1c5096ab4f749eb5b4319b8efbb4",
}
# (argsDigest, resultDigest, statement sha256) as prefix..suffix, and the statement's length.
VECTORS = {
    R1: (
        ("c4abf59de6c7", "5faf715ffb"),
        ("606304b087b5", "f27df59b70"),
        ("3b5afda33cf4", "c702b9ce6bb"),
        2508,
    ),
    R2: (
        ("0a4484e2577e", "db739d50ec8"),
        ("eb0730eb5887", "bdab46e00d"),
        ("1a4b4ca59449", "a903dfeb5be"),
        2415,
    ),
    R3: (
        ("4db941ccc652", "3387fd24748"),
        ("0dcc2055a6ed", "66fe2d5eb907"),
        ("d7dbed722c9d", "f39bca73677"),
        2532,
    ),
}

EXPLAIN_R1 = """\
WHO                          support-agent (attested, named in a signed grant)
WHO AUTHORIZED IT            user_456, grant signed by key 47dea58ea00f, valid 2026-09-01T00:00:00.000Z to 2026-09-02T00:00:00.000Z
WHAT WAS ALLOWED             tools memory.write, memory.read, memory.retract
                             policy ae6f3bbc10d4 decided allow by policy0
WHAT THE AGENT SAW           no facts fetched for this call
                             no beliefs shown before this call
WHAT IT DID                  memory.write {"predicate":"plan","space":"org","subject":"acct:42","value":"enterprise"} -> executed
WHY                          the policy permitted it (policy0)
WHAT EVIDENCE                receipt 11111111-1111-4111-8111-111111111111, leaf 0 of a log whose head is signed by fd110d301d2f
CAN I VERIFY IT              VERIFIED, 16 checks
DID ANYTHING DEPEND ON THIS  1 belief(s) written in this call, 1 later call(s) made after seeing them, 1 belief(s) derived
                               wrote acct:42 plan = "enterprise" [f1f1f1f1]: believed
                               then 2026-09-01T10:02:00.000Z memory.write executed (receipt 33333333)
WHAT NEEDS REVERSAL          2 belief(s) still believed, and 1 later call(s) to review
                               acct:42 plan = "enterprise" [f1f1f1f1] (space org)
                               acct:42 discount = 20 [f2f2f2f2] (space org)
"""

BLAST_F1 = """\
fact f1f1f1f1-0000-4000-8000-000000000001: acct:42 plan = "enterprise" (space org, by support-agent, attested)
not retracted
1 call(s) made after the agent was shown it:
  2026-09-01T10:02:00.000Z  memory.write       executed  receipt 33333333
1 belief(s) written in those calls, 1 still believed:
  acct:42 discount = 20  fact f2f2f2f2  STILL BELIEVED
"""


def test_the_bundles_reproduce_upstreams_vectors(fixture18: worked.Worked) -> None:
    for rid, bundle in fixture18.bundles.items():
        statement = statement_bytes(bundle)
        predicate = json.loads(statement)["predicate"]
        (args0, args1), (res0, res1), (st0, st1), length = VECTORS[rid]
        assert predicate["request"]["argsDigest"].startswith(args0)
        assert predicate["request"]["argsDigest"].endswith(args1)
        assert predicate["execution"]["resultDigest"].startswith(res0)
        assert predicate["execution"]["resultDigest"].endswith(res1)
        digest = hashlib.sha256(statement).hexdigest()
        assert digest.startswith(st0) and digest.endswith(st1) and len(statement) == length
        head = json.loads(base64.b64decode(bundle["treeHead"]["payload"]))
        assert head["rootHash"] == ROOT[rid]
    r1, r2, r3 = (fixture18.bundles[r] for r in (R1, R2, R3))
    assert r1["inclusion"] == {"leafIndex": 0, "treeSize": 1, "hashes": []}
    assert r2["inclusion"] == {"leafIndex": 1, "treeSize": 2, "hashes": [LEAF[R1]]}
    node = hashlib.sha256(b"\x01" + bytes.fromhex(LEAF[R1]) + bytes.fromhex(LEAF[R2])).hexdigest()
    assert r3["inclusion"] == {"leafIndex": 2, "treeSize": 3, "hashes": [node]}
    # The signatures and the tree head exactly as upstream wrote them (Ed25519 is deterministic).
    assert r1["envelope"]["signatures"] == [
        {
            "keyid": worked.GATEWAY_KEYID,
            "sig": "ng3vj4RNqljAyQpVK49hrq1+2COtPDgg9YIAqQg2EH9N62K2fHdJfuXFuIxix/PTlicvZkXdHPAz+0V9Yt5iAQ==",
        }
    ]
    assert r1["treeHead"]["payload"] == (
        "eyJyb290SGFzaCI6Ijk4MjkyYjQ5NjQ3ZDllZTgyYWYxYjM3NTk1ZmYwNzAyODAxZTJlZDU5ZDg2YTMzNjBlZDA2"
        "Mjk3NjExMGVhMGIiLCJ0aW1lc3RhbXAiOiIyMDI2LTA5LTAxVDEwOjAwOjAwLjAwMFoiLCJ0cmVlU2l6ZSI6MX0="
    )
    assert r1["treeHead"]["signatures"][0]["sig"] == (
        "rau55ydGecaF3BuqTgiRk3JGll8wia7PoiqJCKHOhHwhpHePvLWAhBfsv/iiyvOZYP4hrWUGf4vitoiiB+M7DA=="
    )
    grant = json.loads(statement_bytes(r1))["predicate"]["delegation"]["envelope"]
    assert grant["signatures"][0]["sig"] == (
        "rAXvCsIc6NsyGlCBRA611SjN5/C7TC5kYW1PEDUUkCEc3mjOEpIQ8KSzyQ/fDAQnS21XP0fitw6ezxZ9kjBUCQ=="
    )
    assert (
        "MCowBQYDK2VwAyEAiojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w="
        in fixture18.gateway_pub.read_text()
    )
    assert load_public_ref(fixture18.principal_pub).keyid == worked.PRINCIPAL_KEYID
    assert load_public_ref(fixture18.pack_pub).keyid == worked.PACK_KEYID
    # The bundle file is written pretty, as JSON.stringify(bundle, null, 2) writes it.
    assert (fixture18.receipts / f"{R1}.json").read_text() == pretty(r1)


def test_verify_bundle_gives_upstreams_sixteen_checks(fixture18: worked.Worked) -> None:
    gateway = load_public_ref(fixture18.gateway_pub)
    principal = load_public_ref(fixture18.principal_pub)
    result = verify_bundle(fixture18.bundles[R1], VerifyOptions([gateway], [principal]))
    assert result.ok and len(result.checks) == 16 and all(c.ok for c in result.checks)
    details = [c.detail for c in result.checks if c.detail]
    assert details == [
        "keyid fd110d301d2f",
        "gateway",
        "signed by 47dea58ea00f",
        "2026-09-01T00:00:00.000Z .. 2026-09-02T00:00:00.000Z",
        "memory.write",
        "allow -> executed",
        "issuer key fd110d301d2f",
        "leaf 0 of 1, root 98292b49647d",
    ]
    wrong = verify_bundle(fixture18.bundles[R1], VerifyOptions([principal]))
    assert [c.line() for c in wrong.checks] == [
        "FAIL  receipt signature (issuer key)  (no trusted key matches keyids [fd110d301d2f])"
    ]
    assert not wrong.ok and wrong.statement is None


def test_blast(fixture18: worked.Worked, cli: Cli) -> None:
    run = cli("blast", "--ledger", fixture18.ledger, "--receipts", fixture18.receipts, "--fact", F1)
    assert (run.code, run.out, run.err) == (0, BLAST_F1, "")
    run = cli(
        "blast", "--ledger", fixture18.ledger, "--receipts", fixture18.receipts, "--fact", "nope"
    )
    assert (run.code, run.out) == (1, "")
    assert run.err == "error: --fact nope: not in this ledger; check the fact id\n"
    run = cli(
        "blast",
        "--json",
        f"--ledger={fixture18.ledger}",
        "--receipts",
        fixture18.receipts,
        "--fact",
        F1,
    )
    data = json.loads(run.out)
    assert run.code == 0 and run.out == pretty(data) + "\n"
    assert data["receipts"][0] == {
        "receiptId": R3,
        "timestamp": "2026-09-01T10:02:00.000Z",
        "tool": "memory.write",
        "status": "executed",
        "consumed": [F1],
    }
    assert data["fact"]["validTo"] is None and data["fact"] == worked.F1_WIRE
    assert list(data) == ["fact", "receipts", "derivedFacts", "retraction", "stillBelieved"]
    assert [f["factId"] for f in data["stillBelieved"]] == [F2] and data["retraction"] is None


def test_explain(fixture18: worked.Worked, cli: Cli) -> None:
    keys = ["--issuer-key", fixture18.gateway_pub, "--principal-key", fixture18.principal_pub]
    where = ["--receipts", fixture18.receipts]
    run = cli("explain", *where, "--receipt", R1, "--ledger", fixture18.ledger, *keys)
    assert (run.code, run.out) == (0, EXPLAIN_R1)
    bare = cli("explain", *where, "--receipt", R3).out.splitlines()
    assert (
        bare[5] == " " * 29 + "1 belief(s) shown before this call; open with a ledger to see them"
    )
    assert (
        bare[6].startswith("WHAT IT DID                  memory.write ")
        and '"value":20}' in bare[6]
    )
    assert "leaf 2 of a log" in bare[8]
    assert (
        bare[9]
        == "CAN I VERIFY IT              not checked here; pass the gateway's and principal's public keys"
    )
    assert bare[10:] == [
        "DID ANYTHING DEPEND ON THIS  unknown without a ledger",
        "WHAT NEEDS REVERSAL          unknown without a ledger",
    ]
    full = cli("explain", *where, "--receipt", R3, "--ledger", fixture18.ledger).out
    assert (
        " " * 29
        + "1 belief(s) shown before this call:\n"
        + " " * 29
        + '  acct:42 plan = "enterprise" [f1f1f1f1]\n'
        in full
    )
    assert (
        "1 belief(s) written in this call, 0 later call(s) made after seeing them, 0 belief(s) derived"
        in full
    )
    assert "WHAT NEEDS REVERSAL          1 belief(s) still believed\n" in full


def test_action_pack(fixture18: worked.Worked, cli: Cli, tmp_path: Path) -> None:
    keys = ["--issuer-key", fixture18.gateway_pub, "--principal-key", fixture18.principal_pub]
    out = tmp_path / "r1.pack.json"
    run = cli(
        "explain",
        "--receipts",
        fixture18.receipts,
        "--receipt",
        R1,
        "--ledger",
        fixture18.ledger,
        "--out",
        out,
        "--sign",
        fixture18.pack_key,
    )
    assert run.code == 0 and run.err == f"signed action pack written to {out}\n"
    assert out.read_text() == pretty(json.loads(out.read_text()))  # pretty, no trailing newline
    run = cli("explain", "--verify", out, "--key", fixture18.pack_pub, *keys)
    assert run.code == 0
    assert run.out.split("\n\n")[0].splitlines() == [
        "PASS  pack signature  (keyid 8cef065b7af8)",
        "PASS  pack type",
        "PASS  pack digest",
        "PASS  receipt is the one the pack names",
        "PASS  receipt verifies  (16 checks)",
        "PASS  downstream receipt 33333333 verifies",
        "PASS  written beliefs cite this receipt",
        "PASS  no downstream receipts missing",
    ]
    assert (
        "\n\nRESULT: VERIFIED\n\nWHO " in run.out
        and "CAN I VERIFY IT              VERIFIED, 16 checks" in run.out
    )
    run = cli("explain", "--verify", out, "--key", fixture18.pack_pub)
    assert run.code == 1
    lines = run.out.splitlines()
    assert lines[4] == (
        "FAIL  receipts checked against the gateway's keys  (no issuer key given; pass "
        "--issuer-key to check the receipts inside the pack)"
    )
    assert lines[5:7] == [
        "PASS  written beliefs cite this receipt",
        "PASS  no downstream receipts missing",
    ]
    run = cli("explain", "--verify", out, "--key", fixture18.gateway_pub, *keys)
    assert run.code == 1
    assert (
        run.out
        == "FAIL  pack signature  (no trusted key matches keyids [8cef065b7af8])\n\nRESULT: NOT VERIFIED\n"
    )


@pytest.mark.parametrize("json_flag", [False, True])
def test_after_retractions(
    fixture18: worked.Worked, cli: Cli, tmp_path: Path, json_flag: bool
) -> None:
    worked.retract(fixture18.ledger, F2, "2026-09-01T12:00:00.000Z", "user:admin", "not derived")
    where = ["--ledger", fixture18.ledger, "--receipts", fixture18.receipts]
    out = tmp_path / "f1.pack.json"
    run = cli("pack", *where, "--fact", F1, "--out", out, "--sign", fixture18.pack_key)
    assert run.code == 0 and run.err == f"signed pack written to {out}\n"
    assert run.out.splitlines() == [
        BLAST_F1.splitlines()[0],
        "history: assert",
        "receipts in pack: 2",
        "blast radius: 1 later call(s), 1 derived belief(s), 0 still believed",
    ]
    keys = ["--issuer-key", fixture18.gateway_pub, "--principal-key", fixture18.principal_pub]
    run = cli(
        "pack",
        "--verify",
        out,
        "--key",
        fixture18.pack_pub,
        *keys,
        *(["--json"] if json_flag else []),
    )
    assert run.code == 0
    expected = [
        "PASS  pack signature  (keyid 8cef065b7af8)",
        "PASS  pack type",
        "PASS  pack digest",
        "PASS  no receipts missing",
        "PASS  assert event cites a receipt in the pack  (11111111)",
        "PASS  receipt 11111111 verifies",
        "PASS  receipt 33333333 verifies",
    ]
    if json_flag:
        data = json.loads(run.out)
        assert data["ok"] is True and list(data) == ["ok", "checks", "pack"]
        assert [c["name"] for c in data["checks"]] == [line.split("  ")[1] for line in expected]
    else:
        assert run.out.split("\n\nRESULT: VERIFIED\n\n")[0].splitlines() == expected
    blast = cli("blast", *where, "--fact", F1).out.splitlines()
    assert blast[-1] == "  acct:42 discount = 20  fact f2f2f2f2  no longer believed"
    explain = cli(
        "explain", "--receipts", fixture18.receipts, "--receipt", R1, "--ledger", fixture18.ledger
    ).out
    assert (
        "WHAT NEEDS REVERSAL          1 belief(s) still believed, and 1 later call(s) to review\n"
        in explain
    )
    worked.retract(fixture18.ledger, F1, "2026-09-01T13:00:00.000Z", "user:admin", "bad plan")
    assert cli("blast", *where, "--fact", F1).out.splitlines()[1] == (
        "retracted at 2026-09-01T13:00:00.000Z by user:admin: bad plan"
    )
    explain = cli(
        "explain", "--receipts", fixture18.receipts, "--receipt", R1, "--ledger", fixture18.ledger
    ).out
    assert '  wrote acct:42 plan = "enterprise" [f1f1f1f1]: retracted' in explain
    assert (
        "WHAT NEEDS REVERSAL          nothing still believed; every belief from this call and "
        "after it is retracted, forgotten, or superseded\n"
    ) in explain


def test_r2_is_a_read_that_wrote_nothing(fixture18: worked.Worked, cli: Cli) -> None:
    run = cli(
        "explain", "--receipts", fixture18.receipts, "--receipt", R2, "--ledger", fixture18.ledger
    )
    assert run.code == 0
    assert (
        "DID ANYTHING DEPEND ON THIS  this call wrote no beliefs; nothing in the ledger descends from it"
        in run.out
    )
    assert run.out.endswith("WHAT NEEDS REVERSAL          nothing\n")

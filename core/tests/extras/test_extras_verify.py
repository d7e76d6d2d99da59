"""DSSE, the Merkle log and ``verify_bundle`` beyond the worked fixture: each rule of SPEC-EXTRAS
1.2, 1.3 and 1.6, and the failures a tampered or foreign bundle must produce."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from gatewaysim import Gateway, grant, seeded, text_result

from agent_custody_state.extras import merkle
from agent_custody_state.extras.verify import VerifyOptions, verify_bundle
from agent_custody_state.server.signing import SigningIdentity
from agent_custody_state.signing import (
    IN_TOTO_TYPE,
    b64decode_lenient,
    digest_of,
    dsse_sign,
    dsse_verify,
)

GATEWAY, PRINCIPAL, OTHER = seeded(1), seeded(2), seeded(9)


def opts(**more: Any) -> VerifyOptions:
    return VerifyOptions([GATEWAY.public], [PRINCIPAL.public], **more)


def names(result: Any) -> list[str]:
    return [c.name for c in result.checks if not c.ok]


def resign(bundle: dict[str, Any], change: Any) -> dict[str, Any]:
    """Decode the statement, let ``change`` edit it, sign it again with the gateway key (the log
    no longer matches: only the checks after the signature can tell)."""
    statement = json.loads(base64.b64decode(bundle["envelope"]["payload"]))
    change(statement)
    out = copy.deepcopy(bundle)
    out["envelope"] = dsse_sign(IN_TOTO_TYPE, statement, GATEWAY)
    return out


@pytest.fixture
def gateway(tmp_path: Path) -> Gateway:
    return Gateway(tmp_path, GATEWAY, PRINCIPAL)


def test_dsse_rules() -> None:
    env = dsse_sign("t/x", {"b": 1, "a": [1.0, "é"]}, GATEWAY)
    assert base64.b64decode(env["payload"]) == '{"a":[1,"é"],"b":1}'.encode()
    ok = dsse_verify(env, [OTHER.public, GATEWAY.public])
    assert ok.ok and ok.keyid == GATEWAY.keyid and ok.payload == {"a": [1, "é"], "b": 1}
    assert dsse_verify([], [GATEWAY.public]).error == "malformed envelope"
    assert dsse_verify({**env, "signatures": []}, [GATEWAY.public]).error == "malformed envelope"
    assert dsse_verify({**env, "payload": 3}, [GATEWAY.public]).error == "malformed envelope"
    assert (
        dsse_verify(env, [OTHER.public]).error
        == f"no trusted key matches keyids [{GATEWAY.keyid[:12]}]"
    )
    # The first trusted signature decides; later ones are not tried.
    bad = {"keyid": GATEWAY.keyid, "sig": base64.b64encode(b"\0" * 64).decode()}
    two = {**env, "signatures": [{"keyid": "f" * 64, "sig": "x"}, bad, env["signatures"][0]]}
    assert (
        dsse_verify(two, [GATEWAY.public]).error
        == f"signature by {GATEWAY.keyid[:12]} did not verify"
    )
    # The signed bytes are used as given, never re-canonicalised; a non-JSON payload is named.
    raw = dsse_sign("t/x", "placeholder", GATEWAY)
    raw_bytes = b'{"z":1, "a":2}'
    sig = GATEWAY.private_key.sign(b"DSSEv1 3 t/x %d %s" % (len(raw_bytes), raw_bytes))
    raw.update(
        payload=base64.b64encode(raw_bytes).decode(),
        signatures=[{"keyid": GATEWAY.keyid, "sig": base64.b64encode(sig).decode()}],
    )
    assert dsse_verify(raw, [GATEWAY.public]).payload == {"z": 1, "a": 2}
    not_json = b"not json"
    sig = GATEWAY.private_key.sign(b"DSSEv1 3 t/x 8 not json")
    raw.update(
        payload=base64.b64encode(not_json).decode(),
        signatures=[{"keyid": GATEWAY.keyid, "sig": base64.b64encode(sig).decode()}],
    )
    assert dsse_verify(raw, [GATEWAY.public]).error == "payload is not JSON"


def test_base64_is_decoded_as_leniently_as_node() -> None:
    data = bytes(range(256))
    plain = base64.b64encode(data).decode()
    assert b64decode_lenient(plain) == data
    assert b64decode_lenient(plain.rstrip("=")) == data
    assert b64decode_lenient("\n".join(plain[i : i + 60] for i in range(0, len(plain), 60))) == data
    assert b64decode_lenient(base64.urlsafe_b64encode(data).decode()) == data
    assert b64decode_lenient("QUJD=garbage") == b"ABC"


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 7, 8, 9, 13])
def test_every_audit_path_verifies_and_no_other_leaf_does(size: int) -> None:
    leaves = [merkle.leaf_hash(bytes([i])) for i in range(size)]
    root = merkle.root(leaves).hex()
    for index in range(size):
        proof = {
            "leafIndex": index,
            "treeSize": size,
            "hashes": [h.hex() for h in merkle.audit_path(index, leaves)],
        }
        assert merkle.verify_inclusion(leaves[index], proof, root)
        other = leaves[(index + 1) % size]
        assert size == 1 or not merkle.verify_inclusion(other, proof, root)
        assert not merkle.verify_inclusion(leaves[index], {**proof, "leafIndex": size}, root)
        assert not merkle.verify_inclusion(leaves[index], {**proof, "leafIndex": -1}, root)
    assert (
        merkle.root([]).hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )


def test_a_denied_call(gateway: Gateway) -> None:
    bundle = gateway.call(
        "d" * 8 + "-0000-4000-8000-000000000000",
        "2026-09-01T10:00:00.000Z",
        "memory.write",
        {"subject": "user:me", "space": "user:me"},
        denied=[],
    )
    result = verify_bundle(bundle, opts())
    assert result.ok
    check = {c.name: c for c in result.checks}
    assert check["policy decision consistent with execution"].detail == "deny -> denied"
    statement = result.statement
    assert statement["predicate"]["execution"]["reason"] == "no permit policy matched"


def test_tampering_is_named(gateway: Gateway) -> None:
    bundle = gateway.call(
        "a" * 36, "2026-09-01T10:00:00.000Z", "memory.write", {"v": 1}, text_result({})
    )
    assert verify_bundle(bundle, opts()).ok
    args = resign(bundle, lambda s: s["predicate"]["request"].update(args={"v": 2}))
    assert names(verify_bundle(args, opts())) == ["request args digest", "log inclusion proof"]
    kind = resign(bundle, lambda s: s.update(predicateType="x"))
    assert [c.line() for c in verify_bundle(kind, opts()).checks][
        -1
    ] == "FAIL  receipt payload type"
    keyid = resign(bundle, lambda s: s["predicate"]["issuer"].update(keyid="0" * 64))
    assert "issuer keyid matches signer" in names(verify_bundle(keyid, opts()))
    scope = resign(bundle, lambda s: s["predicate"]["tool"].update(name="shell.exec"))
    failed = verify_bundle(scope, opts())
    detail = {c.name: c.detail for c in failed.checks}["executed tool within delegated scope"]
    assert detail == "shell.exec not in [memory.write, memory.read, memory.retract]"
    late = resign(bundle, lambda s: s["predicate"].update(timestamp="2026-09-03T00:00:00.000Z"))
    assert "delegation valid at receipt time" in names(verify_bundle(late, opts()))
    head = copy.deepcopy(bundle)
    head["inclusion"]["treeSize"] = 2
    assert names(verify_bundle(head, opts())) == [
        "tree head matches inclusion proof size",
        "log inclusion proof",
    ]
    no_principal = verify_bundle(bundle, VerifyOptions([GATEWAY.public]))
    assert {c.name: c.detail for c in no_principal.checks}[
        "delegation signature (principal key)"
    ] == (f"no trusted key matches keyids [{PRINCIPAL.keyid[:12]}]")


def test_claimed_principal_and_foreign_grant(tmp_path: Path) -> None:
    foreign = Gateway(tmp_path, GATEWAY, PRINCIPAL, delegation=grant(OTHER))
    bundle = foreign.call("b" * 36, "2026-09-01T10:00:00.000Z", "memory.read", {}, text_result({}))
    check = {
        c.name: c
        for c in verify_bundle(
            bundle, VerifyOptions([GATEWAY.public], [PRINCIPAL.public, OTHER.public])
        ).checks
    }
    assert not check["delegation binds principal and agent"].ok
    claimed = resign(
        bundle,
        lambda s: (
            s["predicate"].pop("delegation"),
            s["predicate"].update(principal={"id": None, "provenance": "claimed"}),
        ),
    )
    result = verify_bundle(claimed, opts())
    assert names(result) == ["gateway receipt carries a delegation", "log inclusion proof"]
    line = [c.line() for c in result.checks if c.name.startswith("principal")]
    assert line == [
        "PASS  principal is claimed, not attested  (no signed delegation in this receipt)"
    ]


def test_a_precommitted_call_has_twenty_one_checks(gateway: Gateway) -> None:
    gateway.call("c" * 36, "2026-09-01T10:00:00.000Z", "memory.read", {}, text_result({}))
    bundle = gateway.call(
        "e" * 36,
        "2026-09-01T10:00:01.000Z",
        "memory.write",
        {"v": 1},
        text_result({}),
        precommit=True,
    )
    result = verify_bundle(bundle, opts())
    assert result.ok and len(result.checks) == 21
    lines = [c.line() for c in result.checks if c.name.startswith("authorization")]
    assert lines == [
        f"PASS  authorization signature (issuer key)  (keyid {GATEWAY.keyid[:12]})",
        f"PASS  authorization names this call  (memory.write for receipt {'e' * 12})",
        f"PASS  authorization tree head signature  (keyid {GATEWAY.keyid[:12]})",
        "PASS  authorization log inclusion proof  (leaf 1 of 2)",
        "PASS  authorization logged before execution  (authorization leaf 1, receipt leaf 2)",
    ]
    assert (gateway.directory / f"{'e' * 36}.authorization.json").exists()
    other = resign(bundle, lambda s: s["predicate"].update(receiptId="f" * 36))
    assert "authorization names this call" in names(verify_bundle(other, opts()))


def test_a_log_run_by_someone_else(tmp_path: Path) -> None:
    log = seeded(7)
    gateway = Gateway(tmp_path, GATEWAY, PRINCIPAL)
    bundle = gateway.call("a" * 36, "2026-09-01T10:00:00.000Z", "memory.read", {}, text_result({}))
    head = json.loads(base64.b64decode(bundle["treeHead"]["payload"]))
    bundle["treeHead"] = dsse_sign(
        "application/vnd.agent-custody.treehead+json", {**head, "log": "tenant-1"}, log
    )
    assert names(verify_bundle(bundle, opts())) == ["tree head signature"]
    with_log = verify_bundle(bundle, opts(log_keys=[log.public], log_id="tenant-1"))
    assert with_log.ok
    lines = {c.name: c.line() for c in with_log.checks}
    assert lines["tree head signature"] == f"PASS  tree head signature  (log key {log.keyid[:12]})"
    assert (
        lines["tree head names the expected log"]
        == "PASS  tree head names the expected log  (log tenant-1)"
    )
    assert "tree head names the expected log" in names(
        verify_bundle(bundle, opts(log_keys=[log.public], log_id="tenant-2"))
    )


def test_our_servers_signed_results_verify_as_upstream_evidence(gateway: Gateway) -> None:
    """The memory server signs each result (SPEC 4.4); the receipt's upstream check accepts it."""
    server = SigningIdentity(seeded(5).private_key)
    rid = "a" * 36
    content = [{"type": "text", "text": json.dumps({"ok": True})}]
    envelope = server.sign_result(
        receipt_id=rid, tool="memory.read", content=content, is_error=False
    )
    result = {"content": content, "_meta": {"agent-custody/upstream-signature": envelope}}
    bundle = gateway.call(
        rid, "2026-09-01T10:00:00.000Z", "memory.read", {}, result, upstream={"envelope": envelope}
    )
    upstream = [seeded(5).public]
    checks = {c.name: c for c in verify_bundle(bundle, opts(upstream_keys=upstream)).checks}
    assert checks["upstream signature (upstream key)"].detail == f"keyid {seeded(5).keyid[:12]}"
    assert "upstream signature (upstream key)" not in {
        c.name for c in verify_bundle(bundle, opts()).checks
    }
    changed = resign(
        bundle, lambda s: s["predicate"]["execution"]["result"]["content"][0].update(text="{}")
    )
    detail = {c.name: c.detail for c in verify_bundle(changed, opts(upstream_keys=upstream)).checks}
    assert (
        detail["upstream signature (upstream key)"]
        == "signed content differs from the result in the receipt"
    )
    elsewhere = resign(bundle, lambda s: s["predicate"]["tool"].update(name="memory.write"))
    detail = {
        c.name: c.detail for c in verify_bundle(elsewhere, opts(upstream_keys=upstream)).checks
    }
    assert detail["upstream signature (upstream key)"] == "signed for tool memory.read"
    assert (
        digest_of({"content": content, "isError": False})
        == json.loads(base64.b64decode(envelope["payload"]))["contentDigest"]
    )


@pytest.mark.parametrize(
    ("issued", "valid"),
    [
        ("2026-09-01T00:00:00.000Z", True),
        ("2026-09-01T00:00:00Z", True),
        ("2026-09-01T00:00:00.123456Z", True),
        ("2026-09-01 00:00:00Z", False),  # a space for T
        ("20260901T000000Z", False),  # the basic format
        ("2026-09-01T00:00Z", False),  # no seconds
        ("2026-09-01T00:00:00+00:00", False),  # an offset, not Z
        ("2026-09-01T00:00:00.000z", False),
    ],
)
def test_a_grant_time_is_an_iso_datetime_with_z(issued: str, valid: bool) -> None:
    """SPEC-EXTRAS 1.5: grant times are ISO datetimes with ``Z``, as the original's schema takes
    them; ``fromisoformat`` alone accepted other spellings of the same instant."""
    from agent_custody_state.extras.verify import verify_delegation

    payload, _, error = verify_delegation(grant(PRINCIPAL, issued=issued), [PRINCIPAL.public])
    assert (payload is not None) == valid, error
    if not valid:
        assert error == "invalid delegation: issuedAt: expected an ISO datetime with Z"

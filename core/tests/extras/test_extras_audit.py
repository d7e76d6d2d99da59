"""SPEC-EXTRAS audit (2026-12-06): text outputs pad and list as JavaScript does.

``pad(s, n)`` is ``padEnd``, which counts UTF-16 code units: a character outside the Basic
Multilingual Plane (an emoji in a scenario or tool name) takes two columns of the width. Objects
are listed in ``Object.entries`` order: array-index keys first, then the rest as written.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import worked
from worked import R1, R3

from agent_custody_state.extras.actionpack import ACTION_PACK_TYPE, verify_action_pack
from agent_custody_state.extras.blast import BlastRadius, format_blast
from agent_custody_state.extras.bundles import ReceiptSummary
from agent_custody_state.extras.evals import format_report
from agent_custody_state.extras.pack import PACK_TYPE, format_pack, verify_pack
from agent_custody_state.extras.verify import VerifyOptions
from agent_custody_state.keys import load_key_pair, load_public_ref
from agent_custody_state.signing import IN_TOTO_TYPE, STATEMENT_TYPE, digest_of, pae

EMOJI = "\U0001f4dd"  # one code point, two UTF-16 code units


def test_eval_rows_pad_names_in_utf16_units() -> None:
    zero = dict.fromkeys(
        ("reads", "staleReads", "contradictions", "blastRadius", "correctReads"), 0
    )
    report = {"scenarios": [{"name": f"{EMOJI} plan", **zero, "failures": []}], "totals": zero}
    first = format_report(report).split("\n")[0]
    # "📝 plan".padEnd(76): 7 code units, so 69 spaces.
    assert first.startswith(f"{EMOJI} plan" + " " * 69 + " reads  0")


def test_blast_rows_pad_tool_and_status_in_utf16_units() -> None:
    summary = ReceiptSummary(R3, "2026-09-01T10:02:00.000Z", f"{EMOJI}.write", "executed", [])
    text = format_blast(BlastRadius(None, [summary], [], None, []), "f")
    # "📝.write".padEnd(18): 8 code units, so 10 spaces.
    assert f"  2026-09-01T10:02:00.000Z  {EMOJI}.write{' ' * 10} executed  receipt 33333333" in (
        text.split("\n")
    )


def test_forget_stores_print_in_object_order() -> None:
    pack = {
        "factId": "f",
        "fact": None,
        "history": [],
        "receipts": {},
        "missingReceipts": [],
        "holds": [],
        "forget": {
            "event": {"txTime": "2026-09-01T12:00:00.000Z", "actor": "user:admin"},
            "receiptId": None,
            "verification": {"mem0": "verified", "2": "verified", "1": "absent"},
        },
        "blast": {},
    }
    assert "stores: 1=absent, 2=verified, mem0=verified" in format_pack(pack)


def _signed_as_written(statement: dict[str, Any], key_path: Any) -> dict[str, Any]:
    """A DSSE envelope over the statement's JSON in document order (not canonical): the
    payload bytes are verified as given, and read in JavaScript's object order."""
    key = load_key_pair(key_path)
    body = json.dumps(statement, separators=(",", ":")).encode()
    sig = key.private_key.sign(pae(IN_TOTO_TYPE, body))
    return {
        "payloadType": IN_TOTO_TYPE,
        "payload": base64.b64encode(body).decode(),
        "signatures": [{"keyid": key.keyid, "sig": base64.b64encode(sig).decode()}],
    }


def _statement(name: str, kind: str, predicate: dict[str, Any]) -> dict[str, Any]:
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": name, "digest": {"sha256": digest_of(predicate)}}],
        "predicateType": kind,
        "predicate": predicate,
    }


def _keys(w: worked.Worked) -> VerifyOptions:
    return VerifyOptions([load_public_ref(w.gateway_pub)], [load_public_ref(w.principal_pub)])


def test_custody_pack_receipts_are_checked_in_object_order(fixture18: worked.Worked) -> None:
    bundles = fixture18.bundles
    # Written with a plain key first; JavaScript lists the array-index key "7" before it.
    receipts = {R3: bundles[R3], "7": bundles[R1]}
    pack = {"factId": "f", "history": [], "receipts": receipts, "missingReceipts": []}
    envelope = _signed_as_written(_statement("custody-pack:f", PACK_TYPE, pack), fixture18.pack_key)
    result = verify_pack(envelope, [load_public_ref(fixture18.pack_pub)], _keys(fixture18))
    names = [c.name for c in result.checks]
    assert names[names.index("no receipts missing") + 1 :] == [
        "receipt 7 verifies",
        "receipt 7 is the receipt it claims to be",
        "receipt 33333333 verifies",
    ]


def test_action_pack_receipts_are_checked_in_object_order(fixture18: worked.Worked) -> None:
    bundles = fixture18.bundles
    pack = {
        "receiptId": R1,
        "receipt": bundles[R1],
        "written": [],
        "receipts": {R3: bundles[R3], "7": bundles[R1]},
        "missingReceipts": [],
    }
    envelope = _signed_as_written(
        _statement(f"action-pack:{R1}", ACTION_PACK_TYPE, pack), fixture18.pack_key
    )
    result = verify_action_pack(envelope, [load_public_ref(fixture18.pack_pub)], _keys(fixture18))
    names = [c.name for c in result.checks]
    assert names[names.index("receipt verifies") + 1 : -2] == [
        "downstream receipt 7 verifies",
        "downstream receipt 33333333 verifies",
    ]

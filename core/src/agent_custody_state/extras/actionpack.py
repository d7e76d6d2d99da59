"""The signed action pack: ``explain --out --sign`` and ``explain --verify`` (SPEC-EXTRAS 3.3).

The pack is signed as an in-toto statement (subject ``action-pack:<receiptId>``). Verifying it
checks the pack's own signature and digest, the receipt inside it and every downstream receipt
against the gateway's keys (when given), that the written beliefs cite this receipt, and that no
downstream receipt was missing when the pack was built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent_custody_state.canonical import js_key_order
from agent_custody_state.extras.bundles import decode_statement
from agent_custody_state.extras.jsview import at, text
from agent_custody_state.extras.signed import open_pack, sign_statement
from agent_custody_state.extras.verify import Check, VerifyOptions, VerifyResult, verify_bundle
from agent_custody_state.signing import KeyPair, PublicKeyRef

ACTION_PACK_TYPE = "https://agent-custody.dev/action-pack/v0.1"
NO_ISSUER_KEY = "no issuer key given; pass --issuer-key to check the receipts inside the pack"


def sign_action_pack(pack: dict[str, Any], key: KeyPair) -> dict[str, Any]:
    return sign_statement(f"action-pack:{pack['receiptId']}", ACTION_PACK_TYPE, pack, key)


@dataclass
class PackVerification:
    """``{ok, checks, pack}`` (and ``receipt``, the receipt's own verification, for an action
    pack checked with receipt keys)."""

    ok: bool
    checks: list[Check] = field(default_factory=list)
    pack: Any = None
    receipt: VerifyResult | None = None

    def lines(self) -> list[str]:
        """The check lines, an empty line, the RESULT line."""
        return [
            *(c.line() for c in self.checks),
            "",
            f"RESULT: {'VERIFIED' if self.ok else 'NOT VERIFIED'}",
        ]

    def as_built(self) -> list[str]:
        """An empty line and when the pack was built, after the pack's answers: a signature
        that still verifies says what the ledger held *then*; a belief forgotten, retracted or
        superseded since still shows as it was, and nothing else in the text says so."""
        if self.pack is None:
            return []
        built = at(self.pack, "generatedAt")
        when = text(built) if isinstance(built, str) else "an unrecorded time"
        return [
            "",
            f"as of {when}, when the pack was built: a belief forgotten, retracted or "
            "superseded since then still shows here as it was; build a new pack to see the "
            "ledger now",
        ]


class Checks:
    """Collects checks in order (``add`` answers whether the check passed)."""

    def __init__(self) -> None:
        self.checks: list[Check] = []

    def add(self, name: str, ok: bool, detail: str | None = None) -> bool:
        self.checks.append(Check(name, bool(ok), detail))
        return bool(ok)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


def receipt_id_of(bundle: Any) -> Any:
    try:
        return at(decode_statement(bundle), "predicate", "receiptId")
    except ValueError:
        return None


def verify_action_pack(
    envelope: Any, pack_keys: list[PublicKeyRef], receipt_keys: VerifyOptions | None = None
) -> PackVerification:
    c = Checks()
    pack = open_pack(envelope, pack_keys, ACTION_PACK_TYPE, c.add)
    if pack is None:
        return PackVerification(False, c.checks)
    receipt_result: VerifyResult | None = None
    c.add(
        "receipt is the one the pack names",
        receipt_id_of(pack.get("receipt")) == pack.get("receiptId"),
    )
    if receipt_keys is not None:
        receipt_result = verify_bundle(pack.get("receipt"), receipt_keys)
        c.add(
            "receipt verifies",
            receipt_result.ok,
            f"{len(receipt_result.checks)} checks"
            if receipt_result.ok
            else receipt_result.failed_names(),
        )
        receipts = pack.get("receipts")
        receipts = receipts if isinstance(receipts, dict) else {}
        for rid in js_key_order(receipts, sort=False):  # Object.entries' order
            r = verify_bundle(receipts[rid], receipt_keys)
            c.add(
                f"downstream receipt {rid[:8]} verifies",
                r.ok and at(r.statement, "predicate", "receiptId") == rid,
                None if r.ok else r.failed_names(),
            )
    else:
        c.add("receipts checked against the gateway's keys", False, NO_ISSUER_KEY)
    written = pack.get("written")
    c.add(
        "written beliefs cite this receipt",
        isinstance(written, list)
        and all(at(f, "source", "receiptId") == pack.get("receiptId") for f in written),
    )
    missing = pack.get("missingReceipts")
    count = len(missing) if isinstance(missing, list) else 0
    c.add(
        "no downstream receipts missing",
        isinstance(missing, list) and count == 0,
        f"{count} cited receipt(s) absent" if count else None,
    )
    return PackVerification(c.ok, c.checks, pack, receipt_result)

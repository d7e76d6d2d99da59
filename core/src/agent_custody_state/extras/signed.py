"""Signed statements of the extras: in-toto statements in a DSSE envelope (SPEC-EXTRAS 3.3, 4, 6.6).

An action pack, a custody pack and an eval report are each signed the same way: the statement
``{_type, subject: [{name, digest: {sha256: digestOf(<what>)}}], predicateType, predicate}``,
payloadType ``application/vnd.in-toto+json``. Opening one runs the three checks every pack
starts with: the signature, the predicate type, the digest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent_custody_state.extras.jsview import at
from agent_custody_state.signing import (
    IN_TOTO_TYPE,
    STATEMENT_TYPE,
    DsseResult,
    KeyPair,
    PublicKeyRef,
    digest_of,
    dsse_sign,
    dsse_verify,
    well_formed,
)


def sign_statement(
    subject: str, predicate_type: str, predicate: Any, key: KeyPair, *, digest_over: Any = None
) -> dict[str, Any]:
    """The envelope over a statement whose subject digests ``digest_over`` (default: the predicate)."""
    statement = {
        "_type": STATEMENT_TYPE,
        "subject": [
            {
                "name": subject,
                "digest": {"sha256": digest_of(predicate if digest_over is None else digest_over)},
            }
        ],
        "predicateType": predicate_type,
        "predicate": predicate,
    }
    return dsse_sign(IN_TOTO_TYPE, statement, key)


def verify_envelope(envelope: Any, keys: list[PublicKeyRef]) -> DsseResult:
    """``dsse_verify``, with a lone surrogate in the payload type made U+FFFD as Node encodes
    it into the signed bytes (Python cannot encode one at all)."""
    kind = envelope.get("payloadType") if isinstance(envelope, dict) else None
    if isinstance(kind, str) and well_formed(kind) != kind:
        envelope = {**envelope, "payloadType": well_formed(kind)}
    return dsse_verify(envelope, keys)


def open_pack(
    envelope: Any,
    keys: list[PublicKeyRef],
    predicate_type: str,
    add: Callable[[str, bool, str | None], bool],
) -> Any:
    """``pack signature``, ``pack type``, ``pack digest``; the predicate, or None where the
    original stops (a bad signature or type)."""
    result = verify_envelope(envelope, keys)
    if not result.ok:
        add("pack signature", False, result.error)
        return None
    add("pack signature", True, f"keyid {result.keyid[:12]}")
    statement = result.payload
    predicate = at(statement, "predicate")
    # The original needs a truthy predicate; anything but an object cannot be a pack either.
    typed = at(statement, "predicateType") == predicate_type and isinstance(predicate, dict)
    if not add("pack type", typed, None):
        return None
    add(
        "pack digest", at(statement, "subject", 0, "digest", "sha256") == digest_of(predicate), None
    )
    return predicate

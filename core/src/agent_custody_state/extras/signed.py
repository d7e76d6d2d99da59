"""Signed statements of the extras: in-toto statements in a DSSE envelope (SPEC-EXTRAS 3.3, 4, 6.6).

An action pack, a custody pack and an eval report are each signed the same way: the statement
``{_type, subject: [{name, digest: {sha256: digestOf(<what>)}}], predicateType, predicate}``,
payloadType ``application/vnd.in-toto+json``. Opening one runs the three checks every pack
starts with: the signature, the predicate type, the digest.

A payload is parsed only once its signature verifies, and then bounded like every other input
of the extras (``jsview.MAX_DEPTH``): a signer's key does not make JSON nested thousands of
levels deep digestible or printable here. Inside a bundle (a receipt, a grant, a tree head) such
a payload fails its check with the reason; a signed file a command was given
(``open_signed``: a pack, a report) is refused with ``SignedTooDeep``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent_custody_state.extras.jsview import TooDeepError, at, check_depth, parse
from agent_custody_state.signing import (
    IN_TOTO_TYPE,
    STATEMENT_TYPE,
    DsseResult,
    KeyPair,
    PublicKeyRef,
    b64decode_lenient,
    digest_of,
    dsse_sign,
    dsse_verify,
    well_formed,
)

#: ``dsse_verify``'s error when the signature verified but the payload did not parse.
_NOT_JSON = "payload is not JSON"


class SignedTooDeep(ValueError):
    """A signed file whose signature verifies but whose payload nests deeper than
    ``jsview.MAX_DEPTH``: unreadable here, whoever signed it."""


def sign_statement(
    subject: str, predicate_type: str, predicate: Any, key: KeyPair, *, digest_over: Any = None
) -> dict[str, Any]:
    """The envelope over a statement whose subject digests ``digest_over`` (default: the
    predicate). ``SignedTooDeep`` for a statement ``open_signed`` would refuse to read back,
    checked before the digest (which would exhaust Python's recursion on it)."""
    try:
        check_depth({"predicate": predicate})  # as deep as the statement
    except TooDeepError as exc:
        raise SignedTooDeep(f"{subject}: the statement to sign is {exc}") from None
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


def _verified(envelope: Any, keys: list[PublicKeyRef]) -> tuple[DsseResult, str | None]:
    """``dsse_verify``, and why a payload whose signature verified is unreadable (too deep)."""
    kind = envelope.get("payloadType") if isinstance(envelope, dict) else None
    if isinstance(kind, str) and well_formed(kind) != kind:
        envelope = {**envelope, "payloadType": well_formed(kind)}
    result = dsse_verify(envelope, keys)
    try:
        if result.ok:
            check_depth(result.payload)
        elif result.error == _NOT_JSON:  # deeper than Python parses, or not JSON at all
            parse(b64decode_lenient(envelope["payload"]))
    except TooDeepError as exc:
        return result, str(exc)
    except ValueError:
        pass  # not JSON: dsse_verify's own verdict stands
    return result, None


def verify_envelope(envelope: Any, keys: list[PublicKeyRef]) -> DsseResult:
    """``dsse_verify``, with a lone surrogate in the payload type made U+FFFD as Node encodes
    it into the signed bytes (Python cannot encode one at all), and a payload nested too deep
    failing as one that does not parse, with the reason."""
    result, deep = _verified(envelope, keys)
    return result if deep is None else DsseResult(False, error=f"{_NOT_JSON} ({deep})")


def open_signed(envelope: Any, keys: list[PublicKeyRef]) -> DsseResult:
    """``verify_envelope`` for a signed file a command was given: a payload nested too deep is
    ``SignedTooDeep`` (one line on the command line), not a verdict on the signature."""
    result, deep = _verified(envelope, keys)
    if deep is not None:
        raise SignedTooDeep(f"the signed payload is not JSON ({deep})")
    return result


def open_pack(
    envelope: Any,
    keys: list[PublicKeyRef],
    predicate_type: str,
    add: Callable[[str, bool, str | None], bool],
) -> Any:
    """``pack signature``, ``pack type``, ``pack digest``; the predicate, or None where the
    original stops (a bad signature or type); ``SignedTooDeep`` for an unreadable payload."""
    result = open_signed(envelope, keys)
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

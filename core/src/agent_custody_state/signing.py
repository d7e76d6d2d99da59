"""DSSE envelopes (keys: ``keys``), shared by the memory server and the operator's extras.

The formats are the receipts gateway's (SPEC-EXTRAS 0 and 1.2): a ``keyid`` is the sha256 hex of
the key's 44-byte SubjectPublicKeyInfo DER; an envelope is ``{payloadType, payload (base64 of the
canonical JSON), signatures: [{keyid, sig}]}`` whose signature covers
``PAE = "DSSEv1 <len type> <type> <len payload> " + payload``. Verification follows the
original's rules exactly: untrusted keyids are skipped, the *first* trusted one decides, the
payload bytes are used as given (never re-canonicalised), and base64 is decoded as leniently as
Node's ``Buffer.from(s, "base64")``, so an envelope one side accepts the other accepts too.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature

from agent_custody_state.canonical import canonical_bytes
from agent_custody_state.keys import KeyFileError, KeyPair, PublicKeyRef, key_id

__all__ = [
    "IN_TOTO_TYPE",
    "STATEMENT_TYPE",
    "DsseResult",
    "KeyFileError",
    "KeyPair",
    "PublicKeyRef",
    "b64decode_lenient",
    "digest_of",
    "dsse_sign",
    "dsse_verify",
    "js_parse",
    "key_id",
    "pae",
]

IN_TOTO_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"


def well_formed(value: str) -> str:
    """``value.toWellFormed()``: a lone surrogate (JSON allows ``"\\ud800"``) becomes U+FFFD,
    as Node writes it; Python cannot encode one, so text is made well-formed before output."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return value


class TooDeep(ValueError):
    """JSON nested deeper than this interpreter parses."""


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE pre-authentication encoding; lengths are byte counts. A lone surrogate in the type
    (JSON can carry one) is encoded as Node encodes it, U+FFFD, so the check fails as there."""
    kind = well_formed(payload_type).encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def digest_of(value: Any) -> str:
    """``digestOf``: sha256 hex of the canonical JSON of a value."""
    return hashlib.sha256(canonical_bytes(value)).hexdigest()


_NOT_BASE64 = re.compile(r"[^A-Za-z0-9+/]")


def b64decode_lenient(text: str) -> bytes:
    """Decode base64 as Node does: URL-safe letters accepted, other stray characters ignored,
    decoding stops at the first ``=``, missing padding is fine."""
    body = text.split("=", 1)[0].replace("-", "+").replace("_", "/")
    body = _NOT_BASE64.sub("", body)
    if len(body) % 4 == 1:  # six dangling bits make no byte
        body = body[:-1]
    try:
        return base64.b64decode(body + "=" * (-len(body) % 4))
    except binascii.Error:  # pragma: no cover - the text is clean by now
        return b""


def _js_int(text: str) -> int | float:
    """JSON.parse keeps numbers as doubles: integers past 2**53 lose their low digits."""
    number = int(text)
    return number if -(2**53) < number < 2**53 else float(number)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def js_parse(data: bytes | str) -> Any:
    """``JSON.parse`` of UTF-8 bytes (malformed sequences become U+FFFD, as Node decodes them)."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    try:
        return json.loads(text, parse_int=_js_int, parse_constant=_no_constant)
    except RecursionError:  # nested deeper than this interpreter parses: unreadable here
        raise TooDeep("JSON nested too deeply to parse") from None


def dsse_sign(payload_type: str, payload: Any, key: KeyPair) -> dict[str, Any]:
    """Sign the canonical JSON of ``payload``; exactly one signature."""
    body = canonical_bytes(payload)
    signature = key.private_key.sign(pae(payload_type, body))
    return {
        "payloadType": payload_type,
        "payload": base64.b64encode(body).decode("ascii"),
        "signatures": [{"keyid": key.keyid, "sig": base64.b64encode(signature).decode("ascii")}],
    }


@dataclass(frozen=True)
class DsseResult:
    """``{ok, payload, keyid}`` or ``{ok: false, error}``."""

    ok: bool
    payload: Any = None
    keyid: str = ""
    error: str = ""


def dsse_verify(envelope: Any, trusted: list[PublicKeyRef]) -> DsseResult:
    """Verify against the trusted keys, matched by keyid (SPEC-EXTRAS 1.2)."""
    if not isinstance(envelope, dict):
        return DsseResult(False, error="malformed envelope")
    payload_text = envelope.get("payload")
    signatures = envelope.get("signatures")
    if not isinstance(payload_text, str) or not isinstance(signatures, list) or not signatures:
        return DsseResult(False, error="malformed envelope")
    payload = b64decode_lenient(payload_text)
    payload_type = envelope.get("payloadType")
    # Node would stringify a non-string type into the PAE; no real signer produces one.
    data = pae(payload_type if isinstance(payload_type, str) else str(payload_type), payload)
    by_id = {key.keyid: key for key in trusted}
    for entry in signatures:
        keyid = entry.get("keyid") if isinstance(entry, dict) else None
        key = by_id.get(keyid) if isinstance(keyid, str) else None
        if key is None:
            continue
        sig = entry.get("sig")
        try:
            key.public_key.verify(b64decode_lenient(sig if isinstance(sig, str) else ""), data)
        except InvalidSignature:
            return DsseResult(False, error=f"signature by {key.keyid[:12]} did not verify")
        try:
            return DsseResult(True, payload=js_parse(payload), keyid=key.keyid)
        except ValueError:
            return DsseResult(False, error="payload is not JSON")
    shown = ", ".join(
        str(entry.get("keyid"))[:12] if isinstance(entry, dict) else "undefined"
        for entry in signatures
    )
    return DsseResult(False, error=f"no trusted key matches keyids [{shown}]")

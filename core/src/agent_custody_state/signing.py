"""Ed25519 keys and DSSE envelopes, shared by the memory server and the operator's extras.

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
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from agent_custody_state.canonical import canonical_bytes

IN_TOTO_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"


class KeyFileError(ValueError):
    """A key file that cannot be read as the Ed25519 key it should hold (one-line message)."""


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE pre-authentication encoding; lengths are byte counts."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def key_id(public_key: Ed25519PublicKey) -> str:
    """sha256 hex of the SubjectPublicKeyInfo DER of the key."""
    der = public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return hashlib.sha256(der).hexdigest()


def digest_of(value: Any) -> str:
    """``digestOf``: sha256 hex of the canonical JSON of a value."""
    return hashlib.sha256(canonical_bytes(value)).hexdigest()


@dataclass(frozen=True)
class PublicKeyRef:
    """A trusted public key and its keyid."""

    public_key: Ed25519PublicKey
    keyid: str

    @classmethod
    def of(cls, public_key: Ed25519PublicKey) -> PublicKeyRef:
        return cls(public_key, key_id(public_key))


@dataclass(frozen=True)
class KeyPair:
    """A signing key with its public half and keyid."""

    private_key: Ed25519PrivateKey

    @property
    def public(self) -> PublicKeyRef:
        return PublicKeyRef.of(self.private_key.public_key())

    @property
    def keyid(self) -> str:
        return self.public.keyid


def _read(path: str | os.PathLike[str]) -> bytes:
    # OSError goes up unchanged: the command line reports it as "<file>: <what went wrong>".
    return Path(path).read_bytes()


def load_private_key(path: str | os.PathLike[str]) -> KeyPair:
    """A PKCS8 PEM Ed25519 private key (``keygen``'s ``*.key``)."""
    try:
        key = serialization.load_pem_private_key(_read(path), password=None)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(f"{path}: not an unencrypted PKCS8 PEM private key ({exc})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"{path}: holds a {type(key).__name__}, not an Ed25519 key")
    return KeyPair(key)


def load_public_key(path: str | os.PathLike[str]) -> PublicKeyRef:
    """An SPKI PEM Ed25519 public key (``*.pub``); like Node's ``createPublicKey``, a private key
    PEM is accepted too and stands for its public half."""
    data = _read(path)
    try:
        key: Any = serialization.load_pem_public_key(data)
    except (ValueError, TypeError):
        try:
            key = serialization.load_pem_private_key(data, password=None).public_key()
        except (ValueError, TypeError) as exc:
            raise KeyFileError(f"{path}: not a PEM public key ({exc})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(f"{path}: holds a {type(key).__name__}, not an Ed25519 key")
    return PublicKeyRef.of(key)


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
    return json.loads(text, parse_int=_js_int, parse_constant=_no_constant)


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

"""Signed results (SPEC 4.4): an Ed25519 DSSE envelope over each result of a receipted call.

The payload is the canonical JSON of ``{receiptId, tool, contentDigest}``, where
``contentDigest`` is the sha256 hex of the canonical JSON of ``{content, isError}`` exactly as
the result goes on the wire. The envelope is DSSE (payloadType
``application/vnd.agent-custody.upstream+json``); the signature covers
``PAE("DSSEv1", type, payload)`` and the ``keyid`` is the sha256 hex of the public key's SPKI DER,
so the receipts gateway can tell which upstream key signed a memory execution. The DSSE and key
primitives live in ``agent_custody_state.signing`` (the operator's extras sign with them too).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from agent_custody_state.canonical import canonical_json
from agent_custody_state.keys import SigningKeyError, load_private_key
from agent_custody_state.signing import key_id, pae
from agent_custody_state.temporaries import pattern, remove_stale, temporary

__all__ = [
    "PAYLOAD_TYPE",
    "SigningIdentity",
    "SigningKeyError",
    "content_digest",
    "generate_key_pair",
    "key_id",
    "pae",
    "verify_envelope",
]

PAYLOAD_TYPE = "application/vnd.agent-custody.upstream+json"


def content_digest(content: Sequence[Any], is_error: bool) -> str:
    """sha256 hex of the canonical JSON of ``{content, isError}`` (content as wire dicts)."""
    return hashlib.sha256(
        canonical_json({"content": list(content), "isError": bool(is_error)}).encode("utf-8")
    ).hexdigest()


@dataclass(frozen=True)
class SigningIdentity:
    """The server's Ed25519 key; ``sign_result`` builds the envelope for one result."""

    private_key: Ed25519PrivateKey

    @property
    def public_key(self) -> Ed25519PublicKey:
        return self.private_key.public_key()

    @property
    def key_id(self) -> str:
        return key_id(self.public_key)

    @classmethod
    def load(
        cls, source: str | os.PathLike[str] | bytes | Ed25519PrivateKey | SigningIdentity
    ) -> SigningIdentity:
        """From a PKCS8 PEM file path, PEM bytes, a key object, or an identity."""
        if isinstance(source, SigningIdentity):
            return source
        return cls(load_private_key(source))

    def sign_result(
        self, *, receipt_id: str, tool: str, content: Sequence[Any], is_error: bool
    ) -> dict[str, Any]:
        payload = canonical_json(
            {
                "receiptId": receipt_id,
                "tool": tool,
                "contentDigest": content_digest(content, is_error),
            }
        ).encode("utf-8")
        signature = self.private_key.sign(pae(PAYLOAD_TYPE, payload))
        return {
            "payloadType": PAYLOAD_TYPE,
            "payload": base64.b64encode(payload).decode("ascii"),
            "signatures": [
                {"keyid": self.key_id, "sig": base64.b64encode(signature).decode("ascii")}
            ],
        }


def verify_envelope(envelope: dict[str, Any], public_key: Ed25519PublicKey) -> dict[str, Any]:
    """Check an envelope's signature; return its decoded payload. Raises ``ValueError``."""
    if envelope.get("payloadType") != PAYLOAD_TYPE:
        raise ValueError(f"unexpected payloadType {envelope.get('payloadType')!r}")
    payload = base64.b64decode(envelope["payload"])
    for entry in envelope.get("signatures", []):
        if entry.get("keyid") != key_id(public_key):
            continue
        try:
            public_key.verify(base64.b64decode(entry["sig"]), pae(PAYLOAD_TYPE, payload))
        except InvalidSignature:
            raise ValueError("signature does not verify") from None
        return dict(json.loads(payload))
    raise ValueError("no signature by this key")


def _replace_file(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to a new file beside ``path`` (``mode`` from its first byte, never through a
    symlink), then rename it over ``path``: a symlink at ``path`` is replaced, never followed.
    The temporaries a kill left for ``path`` are removed first, once stale (``temporaries``)."""
    remove_stale(path.parent, pattern(re.escape(path.name), "tmp"))
    tmp = temporary(path, "tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        os.fchmod(fd, mode)  # whatever the umask
        view = memoryview(data)
        while view:  # a short write (a full disk) must not leave a truncated key
            view = view[os.write(fd, view) :]
        os.fsync(fd)
        os.close(fd)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.close(fd)
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError) and exc.filename is None:  # a write: name the key file
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise


def generate_key_pair(
    out: str | os.PathLike[str], *, force: bool = False
) -> tuple[Path, Path, str]:
    """Write a new Ed25519 private key (PKCS8 PEM, mode 0600) and its public key beside it.

    Returns ``(private_path, public_path, key_id)``. The public key goes to ``<out>.pub``
    (SubjectPublicKeyInfo PEM): that file is what the gateway is given.
    """
    private_path = Path(out)
    public_path = private_path.with_name(private_path.name + ".pub")
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    if not force:
        for path in (private_path, public_path):
            if os.path.lexists(path):  # a dangling symlink counts: it would be written through
                raise FileExistsError(f"{path} already exists; pass --force to replace it")
    private_path.parent.mkdir(parents=True, exist_ok=True)
    _replace_file(private_path, private_pem, 0o600)
    try:
        _replace_file(public_path, public_pem, 0o644)
    except BaseException:  # a private key without its public half is of no use: take it back
        with contextlib.suppress(OSError):
            private_path.unlink()
        raise
    return private_path, public_path, key_id(key.public_key())

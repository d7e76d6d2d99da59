"""Ed25519 keys from PEM files: the one place that reads them, for every layer.

The server signs results with its key (``server.signing``) and the ledger signs its chain
checkpoints with the same key (``ledger.checkpoints``); the ledger may not import the server, so
loading lives here, below both. Private keys are unencrypted PKCS8 PEM (``agent-custody-memory
keygen`` writes them), public keys SubjectPublicKeyInfo PEM (the ``.pub`` file beside it).
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

PrivateKeySource = str | os.PathLike[str] | bytes | Ed25519PrivateKey


class SigningKeyError(ValueError):
    """The signing key cannot be read or is not an Ed25519 key."""


def _read(source: str | os.PathLike[str] | bytes, what: str) -> tuple[bytes, str]:
    if isinstance(source, bytes):
        return source, "the key given"
    path = Path(source)
    try:
        return path.read_bytes(), str(path)
    except OSError as exc:
        raise SigningKeyError(f"cannot read {what} {path}: {exc.strerror}") from None


def load_private_key(source: PrivateKeySource) -> Ed25519PrivateKey:
    """An Ed25519 private key from a PKCS8 PEM file path, PEM bytes, or a key object."""
    if isinstance(source, Ed25519PrivateKey):
        return source
    data, where = _read(source, "signing key")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise SigningKeyError(
            f"{where} is not an unencrypted PKCS8 PEM private key ({exc}); create one with "
            "`agent-custody-memory keygen --out memory.key`"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningKeyError(f"{where} holds a {type(key).__name__}, not an Ed25519 key")
    return key


def load_public_key(
    source: str | os.PathLike[str] | bytes | Ed25519PublicKey | Ed25519PrivateKey,
) -> Ed25519PublicKey:
    """An Ed25519 public key from a SubjectPublicKeyInfo PEM (the ``.pub`` file), or the public
    half of a private key (a PKCS8 PEM file or a key object)."""
    if isinstance(source, Ed25519PublicKey):
        return source
    if isinstance(source, Ed25519PrivateKey):
        return source.public_key()
    data, where = _read(source, "public key")
    if b"PRIVATE KEY" in data:
        return load_private_key(data).public_key()
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise SigningKeyError(f"{where} is not a PEM public key ({exc})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise SigningKeyError(f"{where} holds a {type(key).__name__}, not an Ed25519 key")
    return key


def raw_public_bytes(key: Ed25519PublicKey) -> bytes:
    """The 32-byte RFC 8032 encoding of a public key."""
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)

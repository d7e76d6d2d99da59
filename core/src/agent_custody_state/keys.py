"""Ed25519 keys from PEM files: the one place that reads them, for every layer.

The server signs results with its key (``server.signing``), the ledger signs its chain
checkpoints and erasure certificates with the same key (``ledger.checkpoints``,
``ledger.certificate``) and the operator's extras sign their packs (``signing``); the ledger may
not import the server, so loading lives here, below all of them, with one error type. Private
keys are unencrypted PKCS8 PEM (``agent-custody-memory keygen`` writes them), public keys
SubjectPublicKeyInfo PEM (the ``.pub`` file beside it); like Node's ``createPublicKey``, a
private key stands for its public half wherever a public key is asked for.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

PrivateKeySource = str | os.PathLike[str] | bytes | Ed25519PrivateKey
PublicKeySource = str | os.PathLike[str] | bytes | Ed25519PublicKey | Ed25519PrivateKey


class KeyFileError(ValueError):
    """A key that cannot be read, or is not the Ed25519 key it should be (one-line message)."""


#: The name the server and the ledger have always used for it.
SigningKeyError = KeyFileError


def key_id(public_key: Ed25519PublicKey) -> str:
    """sha256 hex of the SubjectPublicKeyInfo DER of the key (SPEC-EXTRAS 0)."""
    der = public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return hashlib.sha256(der).hexdigest()


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


def _read(source: str | os.PathLike[str] | bytes, what: str) -> tuple[bytes, str]:
    if isinstance(source, bytes):
        return source, "the key given"
    path = Path(source)
    try:
        return path.read_bytes(), str(path)
    except OSError as exc:
        raise KeyFileError(f"cannot read {what} {path}: {exc.strerror}") from None


def load_private_key(source: PrivateKeySource) -> Ed25519PrivateKey:
    """An Ed25519 private key from a PKCS8 PEM file path, PEM bytes, or a key object."""
    if isinstance(source, Ed25519PrivateKey):
        return source
    data, where = _read(source, "signing key")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(
            f"{where} is not an unencrypted PKCS8 PEM private key ({exc}); create one with "
            "`agent-custody-memory keygen --out memory.key`"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"{where} holds a {type(key).__name__}, not an Ed25519 key")
    return key


def load_public_key(source: PublicKeySource) -> Ed25519PublicKey:
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
        raise KeyFileError(f"{where} is not a PEM public key ({exc})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(f"{where} holds a {type(key).__name__}, not an Ed25519 key")
    return key


def load_key_pair(source: PrivateKeySource | KeyPair) -> KeyPair:
    """``load_private_key`` as a ``KeyPair`` (what DSSE signing takes)."""
    return source if isinstance(source, KeyPair) else KeyPair(load_private_key(source))


def load_public_ref(source: PublicKeySource | PublicKeyRef) -> PublicKeyRef:
    """``load_public_key`` as a ``PublicKeyRef`` (what DSSE verification takes)."""
    return source if isinstance(source, PublicKeyRef) else PublicKeyRef.of(load_public_key(source))


def raw_public_bytes(key: Ed25519PublicKey) -> bytes:
    """The 32-byte RFC 8032 encoding of a public key."""
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)

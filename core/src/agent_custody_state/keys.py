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
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

log = logging.getLogger(__name__)

#: A key file is a few hundred bytes: a bigger one is another file given by mistake (a ledger of
#: gigabytes would be read whole first), and a device such as ``/dev/zero`` never ends.
MAX_KEY_FILE = 64 * 1024

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


def _read(source: str | os.PathLike[str] | bytes, what: str) -> tuple[bytes, str, int | None]:
    """The bytes of a key, where they come from, and the file's mode (None: not a file)."""
    if isinstance(source, bytes):
        return source, "the key given", None
    path = Path(source)
    try:
        with path.open("rb") as fh:
            mode = os.fstat(fh.fileno()).st_mode
            data = fh.read(MAX_KEY_FILE + 1)
    except OSError as exc:
        raise KeyFileError(f"cannot read {what} {path}: {exc.strerror}") from None
    if len(data) > MAX_KEY_FILE:
        raise KeyFileError(
            f"{path} is not a key file: it holds more than {MAX_KEY_FILE} bytes; check the path"
        )
    return data, str(path), mode if stat.S_ISREG(mode) else None


_warned: set[tuple[str, int]] = set()


def _warn_if_exposed(where: str, mode: int | None) -> None:
    """A private key readable or writable by others than its owner: a warning (once a process),
    not a refusal: the operator may mean it (a service group), but it is usually a copy made
    under the default umask, and whoever reads it signs as the server."""
    if mode is None or not mode & 0o077 or (where, mode) in _warned:
        return
    _warned.add((where, mode))
    who = "anyone" if mode & 0o007 else "its group"
    log.warning(
        "the private key %s is open to %s (mode %04o); `chmod 600 %s` (keygen writes keys 0600)",
        where,
        who,
        stat.S_IMODE(mode),
        where,
    )


def _private(data: bytes, where: str, mode: int | None) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(
            f"{where} is not an unencrypted PKCS8 PEM private key ({exc}); create one with "
            "`agent-custody-memory keygen --out memory.key`"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"{where} holds a {type(key).__name__}, not an Ed25519 key")
    _warn_if_exposed(where, mode)
    return key


def load_private_key(source: PrivateKeySource) -> Ed25519PrivateKey:
    """An Ed25519 private key from a PKCS8 PEM file path, PEM bytes, or a key object. A file
    that others than its owner may read or write is used, with a warning (logged)."""
    if isinstance(source, Ed25519PrivateKey):
        return source
    return _private(*_read(source, "signing key"))


def load_public_key(source: PublicKeySource) -> Ed25519PublicKey:
    """An Ed25519 public key from a SubjectPublicKeyInfo PEM (the ``.pub`` file), or the public
    half of a private key (a PKCS8 PEM file or a key object)."""
    if isinstance(source, Ed25519PublicKey):
        return source
    if isinstance(source, Ed25519PrivateKey):
        return source.public_key()
    data, where, mode = _read(source, "public key")
    if b"PRIVATE KEY" in data:
        return _private(data, where, mode).public_key()
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

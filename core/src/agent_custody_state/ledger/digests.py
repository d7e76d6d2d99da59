"""HMAC-SHA256 for the chain's value commitments, spelled out for speed.

A commitment is computed on every chained append and checked for every value ``verify`` reads;
``hmac.digest`` sets up an OpenSSL MAC context on each call, which costs about as much again as
the two SHA-256 compressions it runs. For a key of at most one block (every salt the chain
writes is 32 bytes) the RFC 2104 construction is two ``hashlib.sha256`` calls; for a batch of
such keys (``batch_pads``) the key blocks of every one are made in two C calls.
"""

from __future__ import annotations

import hashlib
import hmac

_IPAD = bytes(b ^ 0x36 for b in range(256))
_OPAD = bytes(b ^ 0x5C for b in range(256))
_BLOCK = 64  # SHA-256's block size


def hmac_sha256(key: bytes, message: bytes) -> bytes:
    """``HMAC-SHA256(key, message)``: the same bytes as ``hmac.digest(key, message, "sha256")``
    (a key longer than a block takes that path)."""
    if len(key) > _BLOCK:
        return hmac.digest(key, message, "sha256")
    key = key.ljust(_BLOCK, b"\0")
    inner = hashlib.sha256(key.translate(_IPAD) + message).digest()
    return hashlib.sha256(key.translate(_OPAD) + inner).digest()


def batch_pads(keys: bytes, size: int) -> tuple[bytes, bytes, bytes, bytes]:
    """For ``keys``, keys of ``size`` bytes each (at most a block) laid end to end: every key
    XOR the inner pad and XOR the outer pad, each in one C call, and the rest of the inner and
    the outer key block. ``HMAC-SHA256(key_i, m)`` is then
    ``sha256(outer[a:b] + outer_fill + sha256(inner[a:b] + inner_fill + m).digest())`` with
    ``a = i * size`` and ``b = a + size``: ``hmac_sha256``'s bytes, for a batch of keys."""
    if size > _BLOCK:
        raise ValueError(f"a key of {size} bytes is longer than a block")
    fill = _BLOCK - size
    return keys.translate(_IPAD), keys.translate(_OPAD), b"\x36" * fill, b"\x5c" * fill

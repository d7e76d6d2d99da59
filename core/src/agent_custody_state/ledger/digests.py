"""HMAC-SHA256 for the chain's value commitments, spelled out for speed.

A commitment is computed on every chained append and checked for every value ``verify`` reads;
``hmac.digest`` sets up an OpenSSL MAC context on each call, which costs about as much again as
the two SHA-256 compressions it runs. For a key of at most one block (every salt the chain
writes is 32 bytes) the RFC 2104 construction is two ``hashlib.sha256`` calls.
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

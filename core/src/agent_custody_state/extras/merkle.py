"""The receipts log's Merkle tree (RFC 6962 / RFC 9162), as the gateway builds and checks it.

A leaf is the canonical JSON of a receipt's envelope; ``leaf_hash`` = SHA-256(0x00 || leaf) and
an inner node is SHA-256(0x01 || left || right). ``root`` and ``audit_path`` build what a log
publishes (the tests issue bundles with them); ``verify_inclusion`` is the RFC 9162 2.1.3.2
check every bundle's inclusion proof goes through.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from agent_custody_state.canonical import canonical_bytes

#: A proof hash: hex digits only (``bytes.fromhex`` would also take spaces, which Node does not).
_HEX = re.compile(r"(?:[0-9a-fA-F]{2})+")


def leaf_hash(leaf: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + leaf).digest()


def envelope_leaf_hash(envelope: Any) -> bytes:
    """The leaf hash of a receipt: over the canonical JSON of its envelope."""
    return leaf_hash(canonical_bytes(envelope))


def node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two below ``n`` (n >= 2)."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def root(leaves: Sequence[bytes]) -> bytes:
    """MTH over leaf hashes."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = _split(len(leaves))
    return node(root(leaves[:k]), root(leaves[k:]))


def audit_path(index: int, leaves: Sequence[bytes]) -> list[bytes]:
    """The inclusion proof of leaf ``index`` among ``leaves`` (leaf hashes)."""
    if len(leaves) <= 1:
        return []
    k = _split(len(leaves))
    if index < k:
        return [*audit_path(index, leaves[:k]), root(leaves[k:])]
    return [*audit_path(index - k, leaves[k:]), root(leaves[:k])]


def verify_inclusion(leaf: bytes, inclusion: Any, root_hash: Any) -> bool:
    """RFC 9162 2.1.3.2 over ``{leafIndex, treeSize, hashes}``; anything malformed fails."""
    if not isinstance(inclusion, dict) or not isinstance(root_hash, str):
        return False
    index, size, hashes = (inclusion.get(k) for k in ("leafIndex", "treeSize", "hashes"))
    if not _whole(index) or not _whole(size) or not isinstance(hashes, list):
        return False
    fn, sn = int(index or 0), int(size or 0) - 1
    if fn < 0 or sn < 0 or fn > sn:
        return False
    r = leaf
    for item in hashes:
        p = bytes.fromhex(item) if isinstance(item, str) and _HEX.fullmatch(item) else None
        if p is None or sn == 0:
            return False
        if fn % 2 == 1 or fn == sn:
            r = node(p, r)
            if fn % 2 == 0:
                while fn % 2 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r.hex() == root_hash


def _whole(value: Any) -> bool:
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and float(value).is_integer()
    )

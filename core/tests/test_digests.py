"""The spelled-out HMAC-SHA256 gives ``hmac.digest``'s bytes for every key length."""

from __future__ import annotations

import hmac

from hypothesis import given
from hypothesis import strategies as st

from agent_custody_state.ledger.digests import hmac_sha256


@given(st.binary(max_size=200), st.binary(max_size=300))
def test_the_same_bytes_as_the_standard_library(key: bytes, message: bytes) -> None:
    assert hmac_sha256(key, message) == hmac.digest(key, message, "sha256")


def test_block_edges() -> None:
    for size in (0, 1, 31, 32, 33, 63, 64, 65, 128):
        key = bytes(i % 256 for i in range(size))
        assert hmac_sha256(key, b"m") == hmac.digest(key, b"m", "sha256"), size

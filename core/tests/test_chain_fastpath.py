"""The chain's batch loop (``plainseal.seal_events``, with ``digests.batch_pads``) gives the
bytes of the general path, event by event: the salt, commitment, record and line of each event
of a batch where ledger-built asserts and other events alternate (so each event's salt, seq and
genesis come from the right place in the batch), with and without orjson."""

from __future__ import annotations

import hashlib
import hmac
import os
from typing import Any

import pytest

from agent_custody_state import fastjson
from agent_custody_state.ledger import chain
from agent_custody_state.ledger.digests import batch_pads, hmac_sha256
from agent_custody_state.ledger.model import AssertEvent, Event, Fact, RetractEvent, Source

_sha256 = hashlib.sha256


@pytest.mark.parametrize("size", [1, 16, 32, 63, 64])
def test_batch_pads_give_hmac_sha256(size: int) -> None:
    keys = os.urandom(size * 5)
    inner, outer, inner_fill, outer_fill = batch_pads(keys, size)
    for i, message in enumerate([b"", b"x", b"{}" * 100, os.urandom(65), b"\x00" * 64]):
        a, b = i * size, i * size + size
        got = _sha256(outer[a:b] + outer_fill + _sha256(inner[a:b] + inner_fill + message).digest())
        assert got.digest() == hmac.digest(keys[a:b], message, "sha256")
        assert got.digest() == hmac_sha256(keys[a:b], message)


def test_batch_pads_refuse_a_key_longer_than_a_block() -> None:
    with pytest.raises(ValueError, match="longer than a block"):
        batch_pads(b"k" * 65, 65)


def _events() -> list[Event]:
    """Fresh events as the ledger builds them, plain asserts between others: an odd value (a
    float orjson writes unlike JavaScript), external ids, extra keys, a lone surrogate (which
    orjson refuses), a confidence ``safe_number`` refuses, and a retract."""
    values: list[Any] = [
        {"v": 1, "note": "é \u2028 \U0001f600"},
        1.0,
        "plain",
        {"b": [1, 2.5, None], "a": {"k": True}},
        "\ud800",
        None,
        7,
    ]
    out: list[Event] = []
    for i, value in enumerate(values):
        fact = Fact(
            f"f{i}",
            f"acct:{i}",
            "plan",
            value,
            "org",
            "bot",
            Source(f"r{i}"),
            valid_from="2026-01-01T00:00:00.000Z",
            external={"mem0": "m"} if i == 3 else None,
            confidence=1.0 if i == 6 else 0.5 if i == 2 else None,
        )
        extra = {"vendor": {"x": 1}} if i == 5 else {}
        out.append(AssertEvent(f"e{i}", "2026-01-01T00:00:00.000Z", fact, None, extra))
        if i == 2:
            out.append(RetractEvent("r1", "2026-01-01T00:00:00.000Z", "f0", "bot", "why"))
    return out


def _salts(count: int) -> bytes:
    return bytes(range(256)) * (count * chain.SALT_BYTES // 256 + 1)


def _sealed_one_by_one(head: chain.ChainHead, salts: bytes) -> list[Event]:
    """The general path for every event (``chain._sealed_reference``), in order."""
    out: list[Event] = []
    previous, seq = bytes.fromhex(head.hash), head.seq
    genesis = None if head.chained else {"size": head.seq, "head": head.hash}
    for i, event in enumerate(_events()):
        salt = salts[i * chain.SALT_BYTES : (i + 1) * chain.SALT_BYTES]
        sealed, previous = chain._sealed_reference(event, salt, previous, seq + i + 1, genesis)
        genesis = None
        out.append(sealed)
    return out


@pytest.mark.parametrize("chained", [True, False])
@pytest.mark.parametrize("orjson", [True, False])
def test_the_batch_loop_gives_the_general_paths_bytes(
    monkeypatch: pytest.MonkeyPatch, chained: bool, orjson: bool
) -> None:
    events = _events()
    salts = _salts(len(events))[: chain.SALT_BYTES * len(events)]
    head = chain.ChainHead(3, "ab" * 32, chained)
    expected = _sealed_one_by_one(head, salts)
    if not orjson:
        monkeypatch.setattr(fastjson, "_dumps", None)
    monkeypatch.setattr(chain.os, "urandom", lambda n: salts[:n])
    sealed = chain.seal(head, events)
    assert [e.to_json() for e in sealed] == [e.to_json() for e in expected]
    for got, want in zip(sealed, expected, strict=True):
        assert got.extra["chain"] == want.extra["chain"]
        data = got.to_dict()
        assert got.extra["chain"]["leaf"] == chain.leaf_of(data).hex()
        if isinstance(got, AssertEvent):
            salt = chain.base64.b64decode(got.fact.extra[chain.SALT_KEY])
            commitment = chain.value_commitment(salt, got.fact.value)
            assert got.fact.extra[chain.COMMITMENT_KEY] == commitment
    assert sealed[0].extra["chain"].get("genesis") == (
        None if chained else {"size": 3, "head": "ab" * 32}
    )
    plain = [e for e in sealed if isinstance(e, AssertEvent) and e.line is not None]
    assert len(plain) == (2 if orjson else 0)  # events 0 and 2 took the loop's own path

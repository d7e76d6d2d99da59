"""Ninth review: one value, every backend. A key (subject, predicate, space, a fact id) that one
backend takes, every backend takes; one no SQL key column can hold is refused by every backend
with the same text, before anything is written.

PostgreSQL's text refuses U+0000 and its btree indexes refuse an index row over 2,704 bytes,
both with a raw driver error at ``INSERT``; JSONL, SQLite and ``memory:`` took either, so a
ledger holding one could not be moved to PostgreSQL (its import failed). The PostgreSQL side
is ``plugins/events-postgres/tests/test_review9_values_pg.py``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import AssertRequest, Ledger, LedgerError, serve_memory_http
from agent_custody_state.fastjson import loads
from agent_custody_state.ledger.arguments import MAX_KEY_BYTES, MAX_TOPIC_BYTES
from agent_custody_state.stores import StoreSet, VerifyPolicy
from agent_custody_state.stores.inprocess import InProcessStore
from agent_custody_state_conformance.gateway import GatewayClient

TOKEN = "review9-values-token"
BASE: dict[str, Any] = {"subject": "s", "predicate": "p", "space": "org", "actor": "a"}


@pytest.fixture(params=["memory", "jsonl"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ledger]:
    location = "memory:" if request.param == "memory" else str(tmp_path / "l.jsonl")
    with Ledger(location) as opened:
        opened.assert_fact(**BASE, value=0)
        yield opened


def _refused(ledger: Ledger, says: str, field: str, **changes: Any) -> None:
    """``assert_fact``, ``validate_assert`` and a batch all refuse ``changes`` with ``says``
    naming ``field``, and the ledger's events are unchanged."""
    before = list(ledger.export())
    arguments = {**BASE, "value": 1, **changes}
    for call in (
        lambda: ledger.assert_fact(**arguments),
        lambda: ledger.validate_assert(**arguments),
        lambda: ledger.assert_many([AssertRequest(**BASE, value=2), AssertRequest(**arguments)]),
    ):
        with pytest.raises(LedgerError) as caught:
            call()
        assert says in str(caught.value), str(caught.value)
        assert caught.value.field == field
    assert list(ledger.export()) == before


@pytest.mark.parametrize("field", ["subject", "predicate", "space", "fact_id"])
def test_a_key_holding_nul_is_refused_by_name(ledger: Ledger, field: str) -> None:
    _refused(
        ledger,
        f"{field} holds U+0000 (NUL), which a SQL text column cannot hold: remove it",
        field,
        **{field: "a\x00b"},
    )


def test_a_supersedes_or_action_naming_nul_is_refused_by_name(ledger: Ledger) -> None:
    _refused(ledger, "supersedes holds U+0000 (NUL)", "supersedes", supersedes="x\x00")
    for act in (
        lambda: ledger.retract(fact_id="x\x00", actor="a", reason="r"),
        lambda: ledger.forget(fact_id="x\x00", actor="a", reason="r"),
        lambda: ledger.hold(fact_id="x\x00", actor="a", reason="r"),
    ):
        with pytest.raises(LedgerError, match=r"fact_id holds U\+0000"):
            act()


@pytest.mark.parametrize("field", ["subject", "predicate", "space", "fact_id"])
def test_a_key_is_at_most_max_key_bytes_of_utf8(ledger: Ledger, field: str) -> None:
    # Bytes, not characters: 1,025 two-byte characters are 2,050 bytes.
    other = {"predicate": "p"} if field == "subject" else {"subject": "s"}
    _refused(
        ledger,
        f"{field} is too long: 2050 bytes in UTF-8; the limit is {MAX_KEY_BYTES}",
        field,
        **{field: "é" * 1025},
        **({} if field in other else other),
    )
    kept = ledger.assert_fact(**{**BASE, "value": 1, field: "x" * MAX_KEY_BYTES})
    assert ledger.get(kept.fact.fact_id) is not None


def test_subject_and_predicate_together_fit_one_index_row(ledger: Ledger) -> None:
    half = MAX_TOPIC_BYTES // 2
    _refused(
        ledger,
        f"subject and predicate are too long together: {MAX_TOPIC_BYTES + 1} bytes in UTF-8; "
        f"the limit is {MAX_TOPIC_BYTES} (they make one index key)",
        "subject",
        subject="s" * half,
        predicate="p" * (half + 1),
    )
    ledger.assert_fact(**{**BASE, "value": 1, "subject": "s" * half, "predicate": "p" * half})


@pytest.mark.parametrize(
    "value",
    [
        "a\x00b",  # JSON escapes it: every backend's json text holds "\u0000"
        {"k\x00": ["\ud800", "\udfff"]},  # lone surrogates are escaped too
        "\ufffe\uffff\ufdd0",  # non-characters are valid UTF-8
        -(2**53 - 1),
    ],
)
def test_values_every_backend_holds_stay_accepted(tmp_path: Path, value: Any) -> None:
    """The key rules are about keys: what a value may hold is unchanged (U+0000 and lone
    surrogates live escaped in the JSON text), and actor, reason and receipt id, which no
    column holds, may hold U+0000 too."""
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        event = ledger.assert_fact(**{**BASE, "actor": "a\x00"}, value=value, receipt_id="r\x00")
        ledger.retract(fact_id=event.fact.fact_id, actor="a", reason="why\x00")
    with Ledger(path) as reopened:
        fact = reopened.get(event.fact.fact_id)
    assert fact is not None and fact.value == value and fact.actor == "a\x00"


# Values whose JSON text reads back as another Python value: JavaScript writes -0 as 0 and an
# integral number below 1e21 without fraction or exponent (with its own digits: 1.2345678901234568e20
# is 123456789012345680000, not the double's binary value, and read as the installation's reader
# reads it), and JSON text joins a surrogate pair.
READ_BACK: list[tuple[Any, Any]] = [
    (-0.0, 0),
    (1.0, 1),
    ([2.0, -0.0, 2.5, 1e21], [2, 0, 2.5, 1e21]),
    ({"n": 1.2345678901234568e20}, {"n": loads("123456789012345680000")}),  # float past 2^64
    ({"n": -1e16}, {"n": -(10**16)}),
    ("\ud83d\ude00 and \ud800", "\U0001f600 and \ud800"),
    ({"\ud83d\ude00": (1.0,)}, {"\U0001f600": [1]}),
]


@pytest.mark.parametrize(("given", "read"), READ_BACK)
def test_a_value_reads_the_same_in_the_writing_process_as_after_a_reopen(
    tmp_path: Path, given: Any, read: Any
) -> None:
    """``memory:`` and a JSONL ledger in its writing process kept the value as given (``-0.0``,
    ``1.0``, two surrogates) where SQLite, PostgreSQL and the reopened file read ``0``, ``1``
    and one character: one fact, two answers, and stores were sent the first."""
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger, Ledger("memory:") as memory:
        for live in (ledger, memory):
            event = live.assert_fact(**BASE, value=given)
            fact = live.get(event.fact.fact_id)
            assert fact is not None
            assert repr(event.fact.value) == repr(fact.value) == repr(read)
    with Ledger(path) as reopened:
        (fact,) = reopened.facts()
    assert repr(fact.value) == repr(read)


def test_a_forget_in_the_writing_process_digests_what_the_original_digests(
    tmp_path: Path,
) -> None:
    """Two surrogates given as two characters were digested as their escapes
    (``"\\ud83d\\ude00"``) by ``memory:`` and the writing process, and as the character they
    encode by the original and by a reopened ledger, whose JSON text joins them."""
    expected = hashlib.sha256('"\U0001f600"'.encode()).hexdigest()
    for location in ("memory:", str(tmp_path / "l.jsonl")):
        with Ledger(location) as ledger:
            event = ledger.assert_fact(**BASE, value="\ud83d\ude00")
            gone = ledger.forget(fact_id=event.fact.fact_id, actor="a", reason="r")
        assert (gone.digest_kind, gone.value_digest) == ("sha256", expected), location


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_through_the_tools_a_store_holds_what_the_ledger_reads(tmp_path: Path) -> None:
    """``memory.write``: the store was sent the value as parsed (``-0.0``, ``1.0``) where every
    read of the ledger answers ``0`` and ``1``; and a key holding U+0000 is refused with the
    ledger's text before any store is written (it was written, then refused by PostgreSQL)."""
    store = InProcessStore("copy")
    stores = StoreSet([store], VerifyPolicy(attempts=1, delay=0.001))
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        server = serve_memory_http(ledger, port=0, tokens={TOKEN: "gateway"}, stores=stores)
        try:
            async with GatewayClient.http(server.url, token=TOKEN) as gw:
                write = {"subject": "s", "predicate": "p", "space": "org"}
                done = await gw.call("memory.write", {**write, "value": {"n": -0.0, "m": 1.0}})
                refused = await gw.call("memory.write", {**write, "subject": "a\x00b", "value": 1})
        finally:
            server.close()
    assert not done.is_error, done.text
    assert refused.is_error and refused.text == (
        "subject holds U+0000 (NUL), which a SQL text column cannot hold: remove it"
    )
    with Ledger(path) as reopened:
        (fact,) = reopened.facts()
    copies = [r["value"] for r in store.vendor.rows.values()]
    assert [repr(v) for v in copies] == [repr(fact.value)] == [repr({"n": 0, "m": 1})]


@pytest.mark.parametrize(
    ("field", "text", "problem"),
    [
        ("subject", "a\x00b", "subject holds U+0000"),
        ("space", "s" * 2049, "space is too long: 2049 bytes"),
        ("factId", "f" * 2049, "factId is too long: 2049 bytes"),
        ("predicate", "p" * 2000, "subject and predicate are too long together"),
    ],
)
def test_an_import_holds_ascii_keys_to_the_key_rules(field: str, text: str, problem: str) -> None:
    """Before: the import's fast path for ASCII keys skipped the key rules, so JSONL, SQLite and
    ``memory:`` imported what every write refuses and PostgreSQL cannot index."""
    from agent_custody_state.ledger.model import event_from_dict

    data = {
        "eventId": "e1",
        "kind": "assert",
        "txTime": "2026-01-01T00:00:00.000Z",
        "fact": {
            "factId": "f1",
            "subject": "s" * 700,
            "predicate": "p",
            "value": 1,
            "space": "org",
            "validFrom": "2026-01-01T00:00:00.000Z",
            "validTo": None,
            "actor": "a",
            "confidence": None,
            "provenance": "claimed",
            "source": {"receiptId": None},
        },
    }
    data["fact"][field] = text
    with Ledger("memory:") as ledger:
        with pytest.raises(LedgerError, match=re.escape(problem)):
            ledger.import_events([event_from_dict(data)])
        assert ledger.count() == 0

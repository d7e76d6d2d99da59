"""What every store is sent for a value the ledger takes (tenth review): a string with U+0000 or a
lone surrogate is sent as its JSON text (``stores.holdable``), reversibly, in the text and in the
custody metadata, so a store that holds text as UTF-8 without NUL (PostgreSQL, every HTTP API)
takes, holds and removes every fact the ledger takes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_custody_state import Ledger
from agent_custody_state.backends.memory import MemoryBackend
from agent_custody_state.ledger.model import Fact, Source
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.stores import StoreSet, VerifyPolicy, custody_metadata, fact_text
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.kit import holdable_text, original_text

ODD = [
    "a\x00b",
    "\x00",
    "x\ud800y",
    "\udfff",
    "\ud83d",
    '"a\\u0000b"',  # reads as the escape of "a\x00b": escaped itself, so both stay apart
    '"\\ud800"',
    json.dumps(json.dumps("a\x00b")),
]
PLAIN = ["", "pro", '"quoted"', '"a\\u0041"', "zoë \U0001f600 \ufffe \uffff", "\\u0000", '"']


@pytest.mark.parametrize("text", ODD + PLAIN)
def test_holdable_text_is_reversible_and_holdable(text: str) -> None:
    sent = holdable_text(text)
    assert original_text(sent) == text
    assert "\x00" not in sent
    sent.encode("utf-8")  # no lone surrogate: a driver or HTTP client can send it


@pytest.mark.parametrize("text", PLAIN)
def test_plain_text_is_sent_as_it_is(text: str) -> None:
    assert holdable_text(text) == text


def test_no_two_texts_are_sent_alike() -> None:
    sent = [holdable_text(t) for t in ODD + PLAIN]
    assert len(set(sent)) == len(sent)


def _fact(value: Any, actor: str = "agent", receipt: str | None = "r1") -> Fact:
    return Fact(
        fact_id="f1",
        subject="acct:1",
        predicate="plan",
        value=value,
        space="team",
        actor=actor,
        source=Source(receipt),
        provenance="claimed",
        valid_from="2026-01-01T00:00:00.000Z",
    )


def test_fact_text_escapes_a_string_value_no_store_can_hold() -> None:
    assert fact_text(_fact("a\x00b")) == 'acct:1 plan: "a\\u0000b"'
    assert fact_text(_fact("x\ud800")) == 'acct:1 plan: "x\\ud800"'
    assert fact_text(_fact({"k": "a\x00\ud800"})) == 'acct:1 plan: {"k":"a\\u0000\\ud800"}'
    assert fact_text(_fact("zoë \U0001f600")) == "acct:1 plan: zoë \U0001f600"


def test_custody_metadata_escapes_actor_and_receipt() -> None:
    metadata = custody_metadata(_fact("pro", actor="ag\x00ent", receipt="r\ud800"))
    assert metadata["actor"] == '"ag\\u0000ent"'
    assert metadata["receiptId"] == '"r\\ud800"'
    assert original_text(metadata["actor"]) == "ag\x00ent"
    assert custody_metadata(_fact("pro", receipt=None))["receiptId"] is None
    assert custody_metadata(_fact("pro"))["actor"] == "agent"


class TextStore:
    """A store that holds text as PostgreSQL does: UTF-8, no U+0000 (in text or metadata)."""

    name = "pg-like"

    def __init__(self) -> None:
        self.rows: dict[str, bytes] = {}

    async def put(self, fact: Fact) -> str:
        text, metadata = fact_text(fact), custody_metadata(fact)
        strings = [text, *(v for v in metadata.values() if isinstance(v, str))]
        if any("\x00" in s for s in strings):
            raise ValueError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
        row = json.dumps([text, metadata], ensure_ascii=False)
        self.rows[fact.fact_id] = row.encode("utf-8")  # a lone surrogate raises here
        return fact.fact_id

    async def remove(self, external_id: str, fact: Fact) -> None:
        self.rows.pop(external_id, None)

    async def verify_removed(self, external_id: str, fact: Fact) -> bool:
        wanted = fact_text(fact).encode("utf-8")
        return external_id not in self.rows and all(wanted not in row for row in self.rows.values())


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("value", "actor", "receipt"),
    [
        ("a\x00b", "agent", "r1"),
        ("x\ud800y", "agent", "r1"),
        ({"deep": ["\x00", "\udfff"]}, "agent", "r1"),
        ("pro", "ag\x00ent", "r\x00"),
    ],
)
async def test_a_text_store_takes_holds_and_removes_what_the_ledger_takes(
    value: Any, actor: str, receipt: str
) -> None:
    store = TextStore()
    stores = StoreSet([store], VerifyPolicy(attempts=1, delay=0.0))
    with Ledger(MemoryBackend("memory:")) as ledger:
        custody = Custody(ledger, stores)
        request = AssertRequest(
            subject="acct:1", predicate="plan", value=value, space="team", actor=actor,
            receipt_id=receipt,
        )  # fmt: skip
        old = (await custody.write(request)).event.fact
        assert old.fact_id in store.rows
        sent = json.loads(store.rows[old.fact_id])
        assert sent[0] == fact_text(old)
        assert original_text(sent[1]["actor"]) == actor
        new = await custody.write(request.with_(value="new", supersedes=old.fact_id))
        assert new.mirror is not None and new.mirror.verification == {"pg-like": "verified"}
        assert old.fact_id not in store.rows
        gone = await custody.forget(fact_id=new.event.fact.fact_id, actor="dpo", reason="gdpr")
        assert gone.removal.verification == {"pg-like": "verified"}
        assert new.event.fact.fact_id not in store.rows
        # The forget put the superseded value back (a put-back the store takes as well).
        assert gone.restored is not None and gone.restored.failed == {}

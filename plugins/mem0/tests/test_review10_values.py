"""Every value the ledger takes goes through mem0 (tenth review): a value, actor or receipt id
with U+0000 or a lone surrogate is sent as its JSON text (UTF-8 has no lone surrogate, so the
request could not be encoded, and a PostgreSQL database behind the vendor holds no U+0000);
the fact is held, superseded and removed, verified."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from test_conformance import FakeBackdoor

from agent_custody_state import Ledger
from agent_custody_state.backends.memory import MemoryBackend
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.stores import StoreSet, VerifyPolicy, fact_text
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.kit import original_text
from agent_custody_state_mem0.store import Mem0Store
from agent_custody_state_mem0.testing import FakeMem0

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize(
    ("value", "actor", "receipt"),
    [("a\x00b", "agent", "r1"), ("x\ud800y", "agent", "r1"), ("pro", "ag\x00ent", "r\x00c")],
    ids=["nul-value", "lone-surrogate-value", "nul-actor-and-receipt"],
)
async def test_what_the_ledger_takes_mem0_holds_and_removes(
    make_store: Callable[..., Mem0Store], fake: FakeMem0, value: Any, actor: str, receipt: str
) -> None:
    backdoor = FakeBackdoor(fake)
    stores = StoreSet([make_store()], VerifyPolicy(attempts=3, delay=0.01))
    with Ledger(MemoryBackend("memory:")) as ledger:
        custody = Custody(ledger, stores)
        request = AssertRequest(
            subject="acct:1", predicate="plan", value=value, space="team", actor=actor,
            receipt_id=receipt,
        )  # fmt: skip
        old = (await custody.write(request)).event.fact
        held = backdoor.find(old.fact_id)
        assert held is not None
        assert held["text"] == fact_text(old) and "\x00" not in held["text"]
        assert "\x00" not in held["metadata"]["actor"] + held["metadata"]["receiptId"]
        assert original_text(held["metadata"]["actor"]) == actor
        assert original_text(held["metadata"]["receiptId"]) == receipt
        new = await custody.write(request.with_(value="new", supersedes=old.fact_id))
        assert new.mirror is not None and new.mirror.verification == {"mem0": "verified"}
        assert backdoor.find(old.fact_id) is None
        gone = await custody.forget(fact_id=new.event.fact.fact_id, actor="dpo", reason="gdpr")
        assert gone.removal.verification == {"mem0": "verified"}
        assert backdoor.find(new.event.fact.fact_id) is None

"""Every value the ledger takes goes through Letta (tenth review): a value with U+0000 or a lone
surrogate is sent as its JSON text (Letta's database holds no U+0000, UTF-8 no lone surrogate),
and so is an actor or receipt id in the custody tags; the fact is held, superseded and removed,
verified."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from conftest import LettaBackdoor

from agent_custody_state import Ledger
from agent_custody_state.backends.memory import MemoryBackend
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.stores import StoreSet, VerifyPolicy, fact_text
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.kit import original_text
from agent_custody_state_letta.store import LettaStore

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize(
    ("value", "actor", "receipt"),
    [("a\x00b", "agent", "r1"), ("x\ud800y", "agent", "r1"), ("pro", "ag\x00ent", "r\x00c")],
    ids=["nul-value", "lone-surrogate-value", "nul-actor-and-receipt"],
)
async def test_what_the_ledger_takes_letta_holds_and_removes(
    make_store: Callable[..., LettaStore],
    letta_backdoor: LettaBackdoor,
    value: Any,
    actor: str,
    receipt: str,
) -> None:
    stores = StoreSet([make_store()], VerifyPolicy(attempts=1, delay=0.0))
    with Ledger(MemoryBackend("memory:")) as ledger:
        custody = Custody(ledger, stores)
        request = AssertRequest(
            subject="acct:1", predicate="plan", value=value, space="team", actor=actor,
            receipt_id=receipt,
        )  # fmt: skip
        old = (await custody.write(request)).event.fact
        held = letta_backdoor.find(old.fact_id)
        assert held is not None
        assert held["text"] == fact_text(old) and "\x00" not in held["text"]
        assert not any("\x00" in tag for tag in held["tags"])
        assert original_text(held["metadata"]["actor"]) == actor
        assert original_text(held["metadata"]["receiptId"]) == receipt
        new = await custody.write(request.with_(value="new", supersedes=old.fact_id))
        assert new.mirror is not None and new.mirror.verification == {"letta": "verified"}
        assert letta_backdoor.find(old.fact_id) is None
        gone = await custody.forget(fact_id=new.event.fact.fact_id, actor="dpo", reason="gdpr")
        assert gone.removal.verification == {"letta": "verified"}
        assert letta_backdoor.find(new.event.fact.fact_id) is None

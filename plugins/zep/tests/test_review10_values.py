"""Every value the ledger takes goes through Zep (tenth review): a value with a lone surrogate
(UTF-8 has none, so the SDK's request could not be encoded) is sent as a JSON escape in the
episode body, and an actor or receipt id with U+0000 as its JSON text in the episode metadata;
the fact is held, superseded and removed, verified."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from agent_custody_state import Ledger
from agent_custody_state.backends.memory import MemoryBackend
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.stores import StoreSet, VerifyPolicy
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.kit import original_text
from agent_custody_state_zep.store import ZepStore
from agent_custody_state_zep.testing import FakeZep

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def episode(fake: FakeZep, fact_id: str) -> dict[str, Any] | None:
    with fake.lock:
        found = [e for e in fake.items.values() if (e["metadata"] or {}).get("factId") == fact_id]
    return found[0] if found else None


@pytest.mark.parametrize(
    ("value", "actor"),
    [("x\ud800y", "agent"), ({"k\udfff": ["\ud83d", "a\x00"]}, "agent"), ("pro", "ag\x00ent")],
    ids=["lone-surrogate", "lone-surrogates-nested", "nul-actor"],
)
async def test_what_the_ledger_takes_zep_holds_and_removes(
    make_store: Callable[..., ZepStore], fake: FakeZep, value: Any, actor: str
) -> None:
    stores = StoreSet([make_store(wait_seconds=2)], VerifyPolicy(attempts=1, delay=0.0))
    with Ledger(MemoryBackend("memory:")) as ledger:
        custody = Custody(ledger, stores)
        request = AssertRequest(
            subject="acct:1", predicate="plan", value=value, space="team", actor=actor
        )
        old = (await custody.write(request)).event.fact
        held = episode(fake, old.fact_id)
        assert held is not None
        assert json.loads(held["content"])["value"] == value
        assert "\x00" not in held["metadata"]["actor"]
        assert original_text(held["metadata"]["actor"]) == actor
        new = await custody.write(request.with_(value="new", supersedes=old.fact_id))
        assert new.mirror is not None and new.mirror.verification == {"zep": "verified"}
        assert episode(fake, old.fact_id) is None
        gone = await custody.forget(fact_id=new.event.fact.fact_id, actor="dpo", reason="gdpr")
        assert gone.removal.verification == {"zep": "verified"}
        assert episode(fake, new.event.fact.fact_id) is None

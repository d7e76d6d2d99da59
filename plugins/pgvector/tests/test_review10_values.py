"""Every value the ledger takes goes through pgvector (tenth review): a string value, actor or
receipt id with U+0000 (PostgreSQL's ``text`` and ``jsonb`` refuse it) or a lone surrogate (UTF-8
has none) is written as its JSON text, held, superseded and removed, verified; before, the put
failed with the driver's error."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from agent_custody_state import Ledger
from agent_custody_state.backends.memory import MemoryBackend
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.stores import StoreSet, VerifyPolicy, custody_metadata, fact_text
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.kit import original_text
from agent_custody_state_conformance.embeddings import embed_8
from agent_custody_state_pgvector.store import PgvectorStore

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def store(postgres_url: str) -> Iterator[PgvectorStore]:
    store = PgvectorStore("vectors", postgres_url, embed_8, dimensions=8, table="facts")
    yield store
    store.close()


def row(url: str, fact_id: str) -> tuple[str, dict[str, Any]] | None:
    with psycopg.connect(url) as conn:
        found = conn.execute("SELECT text, metadata FROM facts WHERE id = %s", (fact_id,))
        result = found.fetchone()
    return None if result is None else (result[0], result[1])


@pytest.mark.parametrize(
    ("value", "actor", "receipt"),
    [
        ("a\x00b", "agent", "r1"),
        ("x\ud800y", "agent", "r1"),
        ("pro", "ag\x00ent", "r\x00c"),
    ],
    ids=["nul-value", "lone-surrogate-value", "nul-actor-and-receipt"],
)
async def test_what_the_ledger_takes_pgvector_holds_and_removes(
    store: PgvectorStore, postgres_url: str, value: Any, actor: str, receipt: str
) -> None:
    stores = StoreSet([store], VerifyPolicy(attempts=1, delay=0.0))
    with Ledger(MemoryBackend("memory:")) as ledger:
        custody = Custody(ledger, stores)
        request = AssertRequest(
            subject="acct:1", predicate="plan", value=value, space="team", actor=actor,
            receipt_id=receipt,
        )  # fmt: skip
        old = (await custody.write(request)).event.fact
        held = row(postgres_url, old.fact_id)
        assert held is not None
        text, metadata = held
        assert text == fact_text(old)
        assert metadata == custody_metadata(old)
        assert original_text(metadata["actor"]) == actor
        if isinstance(value, str):
            assert original_text(text.removeprefix("acct:1 plan: ")) == value
        new = await custody.write(request.with_(value="new", supersedes=old.fact_id))
        assert new.mirror is not None and new.mirror.verification == {"vectors": "verified"}
        assert row(postgres_url, old.fact_id) is None
        gone = await custody.forget(fact_id=old.fact_id, actor="dpo", reason="gdpr")
        assert gone.removal.still_held == {}
        assert row(postgres_url, old.fact_id) is None
        gone = await custody.forget(fact_id=new.event.fact.fact_id, actor="dpo", reason="gdpr")
        assert gone.removal.verification == {"vectors": "verified"}
        assert row(postgres_url, new.event.fact.fact_id) is None

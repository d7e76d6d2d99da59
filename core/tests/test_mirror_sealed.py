"""A process that reads a crypto-shred ledger in plain mode sees each value sealed (an envelope:
key id, nonce, ciphertext; SPEC 2.5's reads go on, docs/forget.md). A retraction there that makes
a superseded fact current again must not put that envelope into the mirroring stores as the
fact's text: it is not the value, and a store would serve it to recall. The put-back is reported
failed, saying why; the retraction stands."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from agent_custody_state import AssertRequest, Ledger
from agent_custody_state.stores import StoreSet, VerifyPolicy
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore
from agent_custody_state.stores.mirror import SEALED_PUT_BACK


def _rows(store: InProcessStore) -> dict[str, Any]:
    return {r["metadata"]["factId"]: r["value"] for r in store.vendor.rows.values()}


def test_a_sealed_value_is_not_put_back_by_a_plain_mode_process(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    mirror = InProcessStore("mirror")
    stores = StoreSet([mirror], VerifyPolicy(attempts=1, delay=0))

    async def scenario() -> None:
        with Ledger(path, forget_mode="crypto-shred") as sealed:
            custody = Custody(sealed, stores)
            old = (await custody.write(AssertRequest("acct:1", "plan", "pro", "org", "a"))).event
            new = await custody.write(
                AssertRequest("acct:1", "plan", "team", "org", "a", supersedes=old.fact_id)
            )
        assert _rows(mirror) == {new.event.fact_id: "team"}  # the mirror holds the present
        with Ledger(path) as plain:  # plain mode on a crypto-shred ledger: reads see envelopes
            assert isinstance(plain.get(old.fact_id).value, dict)  # type: ignore[union-attr]
            done = await Custody(plain, stores).retract(
                fact_id=new.event.fact_id, actor="ops", reason="wrong"
            )
            assert plain.is_retracted(new.event.fact_id)
        assert done.restored is not None and done.restored.external == {}
        assert done.restored.failed == {"mirror": SEALED_PUT_BACK}
        assert _rows(mirror) == {}  # neither the retracted value nor an envelope
        recorded = done.event.to_dict().get("restored")
        assert recorded is None or recorded["external"] == {}  # no copy recorded
        with Ledger(path, forget_mode="crypto-shred") as again:  # what crypto-shred mode reads
            assert again.get(old.fact_id).value == "pro"  # type: ignore[union-attr]

    anyio.run(scenario)

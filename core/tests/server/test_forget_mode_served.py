"""A plain-mode server on a ledger written in crypto-shred mode (keys elsewhere): its
``memory.write`` is refused with the reason and changes no byte; reads and retractions go on."""

from __future__ import annotations

from pathlib import Path

import pytest
from servertest import ledger_bytes

from agent_custody_state import Ledger
from agent_custody_state_conformance.gateway import GatewayClient

pytestmark = pytest.mark.anyio


async def test_a_plain_server_refuses_values_for_a_crypto_shred_ledger(tmp_path: Path) -> None:
    folder, vault = tmp_path / "ledger", tmp_path / "vault.keys"
    folder.mkdir()
    path = folder / "ledger.jsonl"
    with Ledger(path, forget_mode="crypto-shred", key_store=str(vault)) as sealed:
        fact = sealed.assert_fact(
            subject="acct:1", predicate="plan", value="pro", space="org", actor="a"
        )
    async with GatewayClient.stdio("serve", "--ledger", str(path)) as gw:
        before = ledger_bytes(folder)
        refused = await gw.call(
            "memory.write", {"subject": "acct:2", "predicate": "plan", "value": "x", "space": "org"}
        )
        assert refused.is_error
        text = " ".join(refused.texts)
        assert "is written in crypto-shred mode" in text and str(vault) in text, text
        assert ledger_bytes(folder) == before
        read = await gw.call("memory.get", {"factId": fact.fact_id})
        assert not read.is_error, read.texts
        assert read.data["value"]["shred"] == "A256GCM"  # as stored: the envelope
        retracted = await gw.call("memory.retract", {"factId": fact.fact_id, "reason": "undo"})
        assert not retracted.is_error, retracted.texts

"""The receipts directories of SPEC-EXTRAS 8, made by the gateway stand-in in front of a real
memory server (``agent-custody-memory serve`` over stdio, with a result-signing key), driven
through the official MCP client as the receipts gateway drives it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from gatewaysim import Forwarder, Gateway, grant, seeded, write_keys

from agent_custody_state_conformance.gateway import GatewayClient

ALL_TOOLS = [
    "memory.write",
    "memory.read",
    "memory.retract",
    "memory.hold",
    "memory.release",
    "memory.forget",
]


@dataclass
class Built:
    root: Path
    receipts: Path
    ledger: Path
    keys: dict[str, Path] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)  # step -> receipt id
    facts: dict[str, str] = field(default_factory=dict)  # step -> fact id

    def flags(self, *names: str) -> list[str]:
        flag = {"gateway.pub": "--issuer-key", "principal.pub": "--principal-key"}
        return [part for n in names for part in (flag[n], str(self.keys[n]))]


def _prepare(root: Path) -> tuple[Built, Gateway, Any]:
    built = Built(root, root / "receipts", root / "ledger.jsonl")
    built.receipts.mkdir()
    keys = root / "keys"
    keys.mkdir()
    gateway_key, principal_key, signer, server = seeded(1), seeded(2), seeded(3), seeded(4)
    for name, key in (
        ("gateway", gateway_key),
        ("principal", principal_key),
        ("pack", signer),
        ("server", server),
    ):
        private, public = write_keys(key, keys, name)
        built.keys[f"{name}.key"], built.keys[f"{name}.pub"] = private, public
    return built, Gateway(built.receipts, gateway_key, principal_key), server


def _serve(built: Built) -> Any:
    return GatewayClient.stdio(
        "serve", "--ledger", str(built.ledger), "--key", str(built.keys["server.key"])
    )


def explain_scenario(root: Path) -> Built:
    """memory.write precommitted: write acct:42 plan=enterprise in org; read acct:42; write
    discount=20."""
    built, gateway, _ = _prepare(root)

    async def run() -> None:
        async with _serve(built) as client:
            gw = Forwarder(gateway, client)
            write = {
                "subject": "acct:42",
                "predicate": "plan",
                "value": "enterprise",
                "space": "org",
            }
            built.ids["write"], data = await gw.call("memory.write", write, precommit=True)
            built.facts["write"] = data["fact"]["factId"]
            built.ids["read"], _ = await gw.call("memory.read", {"subject": "acct:42"})
            derived = {"subject": "acct:42", "predicate": "discount", "value": 20, "space": "org"}
            built.ids["derive"], data = await gw.call("memory.write", derived, precommit=True)
            built.facts["derive"] = data["fact"]["factId"]

    anyio.run(run)
    return built


def pack_scenario(root: Path) -> Built:
    """write person:1 email in team:support; read; write tier=gold; hold; release; forget."""
    built, gateway, _ = _prepare(root)
    gateway.delegation = grant(gateway.principal, scopes=ALL_TOOLS)

    async def run() -> None:
        async with _serve(built) as client:
            gw = Forwarder(gateway, client)
            email = {
                "subject": "person:1",
                "predicate": "email",
                "value": "p1@example.com",
                "space": "team:support",
            }
            built.ids["write"], data = await gw.call("memory.write", email)
            fact = built.facts["write"] = data["fact"]["factId"]
            built.ids["read"], _ = await gw.call(
                "memory.read", {"subject": "person:1", "space": "team:support"}
            )
            tier = {
                "subject": "person:1",
                "predicate": "tier",
                "value": "gold",
                "space": "team:support",
            }
            built.ids["derive"], data = await gw.call("memory.write", tier)
            built.facts["derive"] = data["fact"]["factId"]
            for step in ("hold", "release"):
                built.ids[step], _ = await gw.call(
                    f"memory.{step}", {"factId": fact, "reason": f"{step} for counsel"}
                )
            built.ids["forget"], _ = await gw.call(
                "memory.forget", {"factId": fact, "reason": "erasure request"}
            )

    anyio.run(run)
    return built


def review_scenario(root: Path) -> Built:
    """Two allowed calls (a write in org, a read), one write to user:me denied by the policy
    (which permits memory.write only in space org), and a notes.json that is no receipt."""
    built, gateway, _ = _prepare(root)

    async def run() -> None:
        async with _serve(built) as client:
            gw = Forwarder(gateway, client)
            write = {
                "subject": "acct:42",
                "predicate": "plan",
                "value": "enterprise",
                "space": "org",
            }
            built.ids["write"], data = await gw.call("memory.write", write)
            built.facts["write"] = data["fact"]["factId"]
            built.ids["read"], _ = await gw.call("memory.read", {"subject": "acct:42"})
            mine = {"subject": "user:me", "predicate": "note", "value": "x", "space": "user:me"}
            built.ids["denied"], _ = await gw.call("memory.write", mine, denied=[])

    anyio.run(run)
    (built.receipts / "notes.json").write_text("{}")
    return built

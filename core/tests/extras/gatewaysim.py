"""A stand-in for the receipts gateway: issues receipt bundles exactly as SPEC-EXTRAS 1.9 says.

Keys come from fixed seeds (Ed25519 is deterministic, so a bundle built from the SPEC's inputs
must reproduce its vectors byte for byte); every call is appended to one Merkle log and written
to ``<dir>/<receiptId>.json`` as pretty JSON. Used by the extras' tests to build receipts
directories: the worked fixture of SPEC-EXTRAS 1.8 and the scenarios of its section 8.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state.extras import merkle
from agent_custody_state.extras.jsview import compact, pretty
from agent_custody_state.extras.verify import (
    AUTHORIZATION_PREDICATE_TYPE,
    DELEGATION_TYPE,
    RECEIPT_PREDICATE_TYPE,
    TREEHEAD_TYPE,
)
from agent_custody_state.signing import IN_TOTO_TYPE, STATEMENT_TYPE, KeyPair, digest_of, dsse_sign

POLICY = "permit(principal, action, resource);\n"
GRANT_SCOPES = ["memory.write", "memory.read", "memory.retract"]


def seeded(byte: int) -> KeyPair:
    return KeyPair(Ed25519PrivateKey.from_private_bytes(bytes([byte]) * 32))


def write_keys(key: KeyPair, folder: Path, name: str) -> tuple[Path, Path]:
    """``<name>.key`` (PKCS8 PEM, 0600) and ``<name>.pub`` (SPKI PEM), as the original writes."""
    private = folder / f"{name}.key"
    public = folder / f"{name}.pub"
    private.write_bytes(
        key.private_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    private.chmod(0o600)
    public.write_bytes(
        key.private_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public


def grant(
    principal: KeyPair,
    *,
    principal_id: str = "user_456",
    agent: str = "support-agent",
    scopes: list[str] | None = None,
    issued: str = "2026-09-01T00:00:00.000Z",
    expires: str = "2026-09-02T00:00:00.000Z",
) -> dict[str, Any]:
    payload = {
        "version": "0.1",
        "principal": principal_id,
        "agent": agent,
        "scopes": scopes or list(GRANT_SCOPES),
        "issuedAt": issued,
        "expiresAt": expires,
    }
    return dsse_sign(DELEGATION_TYPE, payload, principal)


@dataclass
class Gateway:
    """Issues bundles into ``directory``; one log for every call."""

    directory: Path
    key: KeyPair
    principal: KeyPair
    delegation: dict[str, Any] | None = None
    principal_id: str = "user_456"
    agent: str = "support-agent"
    policy_text: str = POLICY
    leaves: list[bytes] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.delegation is None:
            self.delegation = grant(self.principal)

    def _head(self, timestamp: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """Tree head and inclusion of the last leaf appended."""
        size = len(self.leaves)
        root = merkle.root(self.leaves).hex()
        head = dsse_sign(
            TREEHEAD_TYPE, {"treeSize": size, "rootHash": root, "timestamp": timestamp}, self.key
        )
        path = [h.hex() for h in merkle.audit_path(size - 1, self.leaves)]
        return head, {"leafIndex": size - 1, "treeSize": size, "hashes": path}

    def _common(self, receipt_id: str, timestamp: str, tool: str, args: Any) -> dict[str, Any]:
        return {
            "receiptId": receipt_id,
            "timestamp": timestamp,
            "issuer": {"kind": "gateway", "keyid": self.key.keyid, "version": "0.1.0"},
            "principal": {
                "id": self.principal_id,
                "keyid": self.principal.keyid,
                "provenance": "attested",
            },
            "agent": {"id": self.agent, "provenance": "attested"},
            "delegation": {"envelope": self.delegation, "provenance": "attested"},
            "tool": {"name": tool, "provenance": "observed"},
            "request": {"args": args, "argsDigest": digest_of(args), "provenance": "claimed"},
            "facts": {},
            "consumed": {"factIds": list(self.seen), "provenance": "observed"},
        }

    def _policy(self, decision: str, reasons: list[str], errors: list[str]) -> dict[str, Any]:
        return {
            "decision": decision,
            "reasons": reasons,
            "errors": errors,
            "policyDigest": hashlib.sha256(self.policy_text.encode()).hexdigest(),
            "provenance": "observed",
        }

    def _statement(self, tool: str, receipt_id: str, args: Any, kind: str, p: Any) -> Any:
        return {
            "_type": STATEMENT_TYPE,
            "subject": [
                {"name": f"tool-call:{tool}:{receipt_id}", "digest": {"sha256": digest_of(args)}}
            ],
            "predicateType": kind,
            "predicate": p,
        }

    def call(
        self,
        receipt_id: str,
        timestamp: str,
        tool: str,
        args: Any,
        result: dict[str, Any] | None = None,
        *,
        denied: list[str] | None = None,
        precommit: bool = False,
        upstream: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """One tool call: allowed and executed with ``result``, or denied with ``denied`` errors."""
        p = self._common(receipt_id, timestamp, tool, args)
        allowed = denied is None
        p["policy"] = self._policy(
            "allow" if allowed else "deny", ["policy0"] if allowed else [], denied or []
        )
        if precommit and allowed:
            auth_p = dict(p)
            auth_statement = self._statement(
                tool, receipt_id, args, AUTHORIZATION_PREDICATE_TYPE, auth_p
            )
            auth_env = dsse_sign(IN_TOTO_TYPE, auth_statement, self.key)
            self.leaves.append(merkle.envelope_leaf_hash(auth_env))
            head, inclusion = self._head(timestamp)
            authorization = {"envelope": auth_env, "treeHead": head, "inclusion": inclusion}
            (self.directory / f"{receipt_id}.authorization.json").write_text(pretty(authorization))
        p["session"] = {"id": None, "toolUseId": None, "provenance": "claimed"}
        p["model"] = {"id": None, "provenance": "claimed"}
        if precommit and allowed:
            p["authorization"] = authorization
        if allowed:
            result = result or {"content": [{"type": "text", "text": "{}"}]}
            execution: dict[str, Any] = {
                "status": "failed" if result.get("isError") else "executed",
                "result": result,
                "resultDigest": digest_of(result),
                "provenance": "observed",
            }
            if upstream is not None:
                execution["upstream"] = upstream
        else:
            reason = "; ".join(denied or []) or "no permit policy matched"
            execution = {"status": "denied", "reason": reason, "provenance": "observed"}
        p["execution"] = execution
        statement = self._statement(tool, receipt_id, args, RECEIPT_PREDICATE_TYPE, p)
        envelope = dsse_sign(IN_TOTO_TYPE, statement, self.key)
        self.leaves.append(merkle.envelope_leaf_hash(envelope))
        head, inclusion = self._head(timestamp)
        bundle = {"envelope": envelope, "treeHead": head, "inclusion": inclusion}
        (self.directory / f"{receipt_id}.json").write_text(pretty(bundle))
        if allowed:
            facts = (result.get("_meta") or {}).get("agent-custody/facts") or []
            self.seen.extend(f for f in facts if f not in self.seen)
        return bundle


class Forwarder:
    """The gateway in front of a real memory server: each call gets a receipt id, goes to the
    server through an official MCP client with the gateway's ``_meta`` (unless the policy
    denies it), and comes back as a bundle built from the server's own result."""

    def __init__(self, gateway: Gateway, client: Any, start: str = "2026-09-01T10:00:00") -> None:
        self.gateway = gateway
        self.client = client
        self.start = datetime.fromisoformat(start).replace(tzinfo=UTC)
        self.count = 0
        self.ids: list[str] = []

    def _timestamp(self) -> str:
        moment = self.start + timedelta(seconds=self.count)
        self.count += 1
        return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")

    async def call(
        self,
        tool: str,
        args: dict[str, Any],
        *,
        precommit: bool = False,
        denied: list[str] | None = None,
    ) -> tuple[str, dict[str, Any]]:
        """``(receiptId, the server's result JSON or {})``."""
        receipt_id = str(uuid.uuid4())
        timestamp = self._timestamp()
        self.ids.append(receipt_id)
        if denied is not None:
            self.gateway.call(receipt_id, timestamp, tool, args, denied=denied)
            return receipt_id, {}
        answer = await self.client.call(tool, args, receipt=receipt_id, agent=self.gateway.agent)
        result: dict[str, Any] = {"content": answer.content}
        if answer.is_error:
            result["isError"] = True
        if answer.meta:
            result["_meta"] = answer.meta
        signature = answer.meta.get("agent-custody/upstream-signature")
        self.gateway.call(
            receipt_id,
            timestamp,
            tool,
            args,
            result,
            precommit=precommit,
            upstream={"envelope": signature} if signature else None,
        )
        return receipt_id, answer.data


def statement_bytes(bundle: dict[str, Any]) -> bytes:
    import base64

    return base64.b64decode(bundle["envelope"]["payload"])


def text_result(value: Any, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """An MCP result with one text item holding compact JSON (the memory server's shape)."""
    out: dict[str, Any] = {"content": [{"type": "text", "text": compact(value)}]}
    if meta:
        out["_meta"] = meta
    return out

"""Signed results (SPEC 4.4), verified here independently with ``cryptography``."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from servertest import run_cli

from agent_custody_state_conformance.gateway import SIGNATURE_KEY, GatewayClient, ToolResult

pytestmark = pytest.mark.anyio

PAYLOAD_TYPE = "application/vnd.agent-custody.upstream+json"


def canonical(value: Any) -> bytes:
    # Sufficient for these ASCII results: sorted keys, no whitespace.
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def verify(result: ToolResult, tool: str, public_key: Ed25519PublicKey) -> dict[str, Any]:
    envelope = result.meta[SIGNATURE_KEY]
    assert envelope["payloadType"] == PAYLOAD_TYPE
    payload = base64.b64decode(envelope["payload"])
    [signature] = envelope["signatures"]
    spki = public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    assert signature["keyid"] == hashlib.sha256(spki).hexdigest()
    pae = b"DSSEv1 %d %s %d %s" % (len(PAYLOAD_TYPE), PAYLOAD_TYPE.encode(), len(payload), payload)
    public_key.verify(base64.b64decode(signature["sig"]), pae)  # raises if it does not verify
    statement = json.loads(payload)
    assert payload == canonical(statement)
    digest = hashlib.sha256(
        canonical({"content": result.content, "isError": result.is_error})
    ).hexdigest()
    assert statement == {"receiptId": result.receipt, "tool": tool, "contentDigest": digest}
    return statement


@pytest.fixture(scope="module")
def key_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Ed25519PublicKey]:
    folder = tmp_path_factory.mktemp("keys")
    done = run_cli("keygen", "--out", str(folder / "memory.key"))
    assert done.returncode == 0, done.stderr
    assert "key id" in done.stdout
    public = serialization.load_pem_public_key((folder / "memory.key.pub").read_bytes())
    assert isinstance(public, Ed25519PublicKey)
    return folder / "memory.key", public


@pytest.fixture(scope="module")
async def signed(
    key_pair: tuple[Path, Ed25519PublicKey], tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[GatewayClient]:
    ledger = tmp_path_factory.mktemp("signed") / "ledger.jsonl"
    async with GatewayClient.stdio(
        "serve", "--ledger", str(ledger), "--key", str(key_pair[0]), "--allow-direct"
    ) as gw:
        yield gw


def test_keygen_writes_private_key_0600_and_refuses_overwrite(
    key_pair: tuple[Path, Ed25519PublicKey],
) -> None:
    private, _ = key_pair
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert b"BEGIN PRIVATE KEY" in private.read_bytes()
    again = run_cli("keygen", "--out", str(private))
    assert again.returncode == 1 and "already exists" in again.stderr


def test_keygen_force_never_writes_through_a_symlink(tmp_path: Path) -> None:
    """``keygen --force`` replaces a symlink with a new file; the link's target is untouched (an
    attacker's link to ~/.bashrc must not receive a private key, nor a victim's file lose its
    content). Without ``--force`` even a dangling link counts as existing."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    os.chmod(victim, 0o644)
    link = tmp_path / "memory.key"
    link.symlink_to(victim)
    dangling = tmp_path / "other.key"
    dangling.symlink_to(tmp_path / "nowhere")
    refused = run_cli("keygen", "--out", str(dangling))
    assert refused.returncode == 1 and "already exists" in refused.stderr
    assert not (tmp_path / "nowhere").exists()
    done = run_cli("keygen", "--out", str(link), "--force")
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "keep me\n" and stat.S_IMODE(victim.stat().st_mode) == 0o644
    assert not link.is_symlink() and stat.S_IMODE(link.stat().st_mode) == 0o600
    assert b"BEGIN PRIVATE KEY" in link.read_bytes()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


async def test_every_receipted_result_is_signed_and_verifies(
    signed: GatewayClient, key_pair: tuple[Path, Ed25519PublicKey]
) -> None:
    public = key_pair[1]
    write = await signed.call(
        "memory.write", {"subject": "a", "predicate": "p", "value": "é ✓", "space": "org"}
    )
    verify(write, "memory.write", public)
    read = await signed.call("memory.read", {"subject": "a"})
    verify(read, "memory.read", public)
    refused = await signed.call("memory.get", {"factId": "nope"})
    assert refused.is_error
    verify(refused, "memory.get", public)
    bad_args = await signed.call("memory.write", {})
    verify(bad_args, "memory.write", public)
    unknown = await signed.call("memory.nope", {})
    verify(unknown, "memory.nope", public)


async def test_tampered_content_fails_verification(
    signed: GatewayClient, key_pair: tuple[Path, Ed25519PublicKey]
) -> None:
    result = await signed.call("memory.read", {})
    result.raw.content[0].text = result.raw.content[0].text.replace("facts", "fakts")  # type: ignore[union-attr]
    with pytest.raises(AssertionError):
        verify(result, "memory.read", key_pair[1])


async def test_calls_without_receipt_are_not_signed(signed: GatewayClient) -> None:
    result = await signed.direct("memory.read", {})
    assert not result.is_error
    assert SIGNATURE_KEY not in result.meta

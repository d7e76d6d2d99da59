"""Erasure certificates over MCP (docs/proofs.md, "Certificates"): ``memory.forget`` with
``certificate: true`` and ``memory.sweep`` with ``certificates: true``, on real servers driven by
the official client over stdio (and HTTP once), each certificate checked by the command line
(``certificate verify --ledger``) against the ledger the server wrote; a server without a key
refuses with ``no_signing_key`` and leaves every ledger file byte-identical.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from servertest import GATEWAY_TOKEN, ledger_bytes, run_cli, start_http, unique, write

from agent_custody_state import Ledger
from agent_custody_state_conformance.gateway import GatewayClient, ToolResult

pytestmark = pytest.mark.anyio

SECRET = "dana.private+mcp@example.org"
OFFLINE = "agent_custody_state_conformance.offline"


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("certified") / "ledger.jsonl"


@pytest.fixture(scope="module")
async def signed(keys: tuple[Path, Path], ledger: Path) -> AsyncIterator[GatewayClient]:
    """A stdio server with a key; spaces ``sweep:*`` have a zero retention window."""
    async with GatewayClient.stdio(
        "serve", "--ledger", str(ledger), "--key", str(keys[0]), "--retention", "sweep:*=PT0S"
    ) as gw:
        yield gw


def verify(certificate: Any, public: Path, ledger: Path, folder: Path) -> str:
    """``certificate verify FILE --key PUB --ledger L`` must pass; its output line."""
    path = folder / f"{unique('cert').replace(':', '-')}.json"
    path.write_text(json.dumps(certificate), encoding="utf-8")
    done = run_cli(
        "certificate", "verify", str(path), "--key", str(public), "--ledger", str(ledger)
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert done.stdout.startswith(f"ok: {path}: fact "), done.stdout
    return done.stdout


def predicate_of(envelope: dict[str, Any]) -> dict[str, Any]:
    return json.loads(base64.b64decode(envelope["payload"]))["predicate"]  # type: ignore[no-any-return]


def check_forget_result(result: ToolResult) -> dict[str, Any]:
    """The certificate of a forget result: in the structured content and as the last text
    item, after the original's first item, which stays the plain forget JSON."""
    assert not result.is_error, result.texts
    envelope = result.raw.structured_content["certificate"]  # type: ignore[index]
    assert len(result.texts) == 2
    first = json.loads(result.texts[0])
    assert "certificate" not in first and first["erasedFromLedger"] is True
    assert json.loads(result.texts[1]) == {"certificate": envelope}
    return envelope  # type: ignore[no-any-return]


async def test_forget_with_certificate_over_stdio(
    signed: GatewayClient, keys: tuple[Path, Path], ledger: Path, tmp_path: Path
) -> None:
    fact = (await write(signed, value=SECRET))["fact"]["factId"]
    await write(signed, value="kept")
    result = await signed.call(
        "memory.forget", {"factId": fact, "reason": "erasure request", "certificate": True}
    )
    envelope = check_forget_result(result)
    predicate = predicate_of(envelope)
    assert predicate["request"]["receiptId"] == result.receipt
    assert predicate["request"]["txTime"] == result.data["txTime"]
    assert predicate["media"]["backend"] == "jsonl" and predicate["outcome"] == "complete"
    assert predicate["verification"]["byteScan"]["hits"] == 0
    assert SECRET.encode() not in ledger.read_bytes()
    line = verify(envelope, keys[1], ledger, tmp_path)
    assert f"fact {fact} erased (Clear), outcome complete" in line
    # The same certificate fails against another ledger; the offline verifier agrees with both.
    other = tmp_path / "other.jsonl"
    with Ledger(other) as elsewhere:
        elsewhere.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")
    path = tmp_path / "cert.json"
    path.write_text(json.dumps(envelope), encoding="utf-8")
    for against, ok in ((ledger, True), (other, False)):
        ours = run_cli(
            "certificate", "verify", str(path), "--key", str(keys[1]), "--ledger", str(against)
        )
        theirs = subprocess.run(
            [sys.executable, "-m", OFFLINE, str(path), *("--key", keys[1], "--ledger", against)],
            capture_output=True,
            text=True,
        )
        assert (ours.returncode, theirs.returncode) == ((0, 0) if ok else (1, 1)), (ours, theirs)


async def test_sweep_with_certificates_gives_one_per_fact(
    signed: GatewayClient, keys: tuple[Path, Path], ledger: Path, tmp_path: Path
) -> None:
    space = unique("sweep")
    facts = {
        (await write(signed, space=space, value=f"{SECRET}-{n}"))["fact"]["factId"]
        for n in range(3)
    }
    result = await signed.call(
        "memory.sweep", {"reason": "retention", "space": space, "certificates": True}
    )
    assert not result.is_error, result.texts
    forgotten = result.raw.structured_content["forgotten"]  # type: ignore[index]
    assert {item["factId"] for item in forgotten} == facts
    by_fact = json.loads(result.texts[-1])["certificates"]
    assert set(by_fact) == facts and "certificates" not in json.loads(result.texts[0])
    for item in forgotten:
        assert item["certificate"] == by_fact[item["factId"]]
        line = verify(item["certificate"], keys[1], ledger, tmp_path)
        assert f"fact {item['factId']} erased" in line


async def test_without_a_key_certificates_are_refused_and_nothing_changes(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "keyless"
    folder.mkdir()
    async with GatewayClient.stdio(
        "serve", "--ledger", str(folder / "ledger.jsonl"), "--retention", "sweep:*=PT0S"
    ) as gw:
        fact = (await write(gw, value=SECRET))["fact"]["factId"]
        space = unique("sweep")
        await write(gw, space=space, value=f"{SECRET}-swept")
        before = ledger_bytes(folder)
        for tool, args in (
            ("memory.forget", {"factId": fact, "reason": "r", "certificate": True}),
            ("memory.sweep", {"reason": "r", "space": space, "certificates": True}),
        ):
            refused = await gw.call(tool, args)
            assert refused.is_error
            assert refused.raw.structured_content["code"] == "no_signing_key"  # type: ignore[index]
            assert "start it with --key" in refused.text and "nothing was forgotten" in refused.text
            assert ledger_bytes(folder) == before, tool
        kept = await gw.call("memory.get", {"factId": fact})
        assert kept.data["value"] == SECRET and not kept.data.get("forgotten")


async def test_forget_with_certificate_over_http(keys: tuple[Path, Path], tmp_path: Path) -> None:
    ledger = tmp_path / "http.jsonl"
    server = start_http(
        "--ledger", str(ledger), "--key", str(keys[0]), "--token-env", "MEMORY_TOKEN"
    )
    try:
        async with GatewayClient.http(server.url, token=GATEWAY_TOKEN) as gw:
            fact = (await write(gw, value=SECRET))["fact"]["factId"]
            result = await gw.call(
                "memory.forget", {"factId": fact, "reason": "gdpr", "certificate": True}
            )
            envelope = check_forget_result(result)
    finally:
        server.stop()
    assert predicate_of(envelope)["outcome"] == "complete"
    verify(envelope, keys[1], ledger, tmp_path)

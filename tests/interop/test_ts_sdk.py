"""The official TypeScript SDK's ``Client`` against the memory server, over stdio and HTTP.

``ts_client.mjs`` connects as the receipts gateway (each call carries the receipt and agent
``_meta`` keys), walks through tools, structured output, resources, a subscription and
completions, and prints what the SDK answered; these tests judge it, compare it with what the
server defines in Python, and read the JSONL ledger the run left behind.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .nodeclients import HERE, assert_tools_as_declared, ledger_events, run_json


@pytest.fixture(scope="module", params=["stdio", "http"])
def run(
    request: pytest.FixtureRequest,
    node: Path,
    node_modules: Path,
    memory_cli: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[dict[str, Any], Path]:
    """One run of the TypeScript client per transport: its report and the ledger it wrote."""
    ledger = tmp_path_factory.mktemp(request.param) / "ledger.jsonl"
    script = str(HERE / "ts_client.mjs")
    options = ["--modules", str(node_modules), "--transport", request.param]
    report, _ = run_json(
        [str(node), script, *options, "--ledger", str(ledger), "--", str(memory_cli)]
    )
    assert report["transport"] == request.param
    return report, ledger


def _text_json(result: dict[str, Any]) -> Any:
    return json.loads(result["content"][0]["text"])


def _resource_json(result: dict[str, Any]) -> Any:
    [content] = result["contents"]
    assert content["mimeType"] == "application/json"
    return json.loads(content["text"])


def test_initialize_declares_what_the_server_offers(run: tuple[dict[str, Any], Path]) -> None:
    init = run[0]["initialize"]
    assert init["protocolVersion"] == "2025-11-25"  # the SDK's newest: it negotiated, not fell back
    assert init["serverInfo"]["name"] == "agent-custody-memory"
    capabilities = init["capabilities"]
    assert "tools" in capabilities
    assert capabilities["resources"]["subscribe"] is True
    assert "completions" in capabilities
    assert "logging" in capabilities
    assert run[0]["loggingLevelSet"] is True


def test_every_tool_is_annotated_with_its_output_schema(run: tuple[dict[str, Any], Path]) -> None:
    tools = assert_tools_as_declared(run[0]["tools"])
    for name, tool in tools.items():
        assert tool["validatorCached"] is True, f"the SDK would not validate {name}'s output"


def test_gateway_write_and_read_with_validated_structured_output(
    run: tuple[dict[str, Any], Path],
) -> None:
    report, ledger = run
    written = report["write"]
    assert written.get("isError") is not True, written
    fact = written["structuredContent"]["fact"]
    # the gateway's _meta was believed: attested, by the grant's agent, with the receipt
    assert fact["provenance"] == "attested"
    assert fact["actor"] == "ts-agent"
    assert fact["source"] == {"receiptId": "rcpt-ts-write"}
    assert fact["value"] == {"tier": "pro", "seats": 5}
    # the text the original's gateway reads is the same object
    assert _text_json(written) == written["structuredContent"]
    # the SDK's own validator (what callTool ran) accepts the result and rejects a wrong one
    assert report["writeValidation"]["result"]["valid"] is True
    assert report["writeValidation"]["wrong"]["valid"] is False
    read = report["read"]
    assert read["_meta"]["agent-custody/facts"] == [fact["factId"]]
    assert [f["factId"] for f in read["structuredContent"]["facts"]] == [fact["factId"]]
    assert _text_json(read) == read["structuredContent"]
    assert report["retract"]["structuredContent"]["factId"] == fact["factId"]
    # the ledger holds exactly what the calls did, in the original's JSONL shape
    events = ledger_events(ledger)
    assert [e["kind"] for e in events] == ["assert", "retract"]
    assert events[0]["fact"]["factId"] == fact["factId"]
    assert events[0]["fact"]["source"] == {"receiptId": "rcpt-ts-write"}
    assert events[1]["source"] == {"receiptId": "rcpt-ts-retract"}


def test_resources_and_templates(run: tuple[dict[str, Any], Path]) -> None:
    report, _ = run
    fact = report["write"]["structuredContent"]["fact"]
    uris = [r["uri"] for r in report["resources"]["resources"]]
    assert uris == ["memory://ledger/head", report["subscription"]["subjectUri"]]
    templates = {t["uriTemplate"] for t in report["templates"]["resourceTemplates"]}
    assert templates == {"memory://fact/{factId}", "memory://subject/{subject}"}
    shown = _resource_json(report["factResource"])
    assert shown["fact"]["factId"] == fact["factId"]
    assert shown["state"] == "current"
    assert [e["kind"] for e in shown["events"]] == ["assert"]
    timeline = _resource_json(report["subjectResource"])
    assert timeline["subject"] == fact["subject"]
    assert [f["factId"] for f in timeline["facts"]] == [fact["factId"]]


def test_subscribed_fact_is_announced_when_retracted(run: tuple[dict[str, Any], Path]) -> None:
    report, _ = run
    subscription = report["subscription"]
    # the subscribed fact, once; not its subject, which this client did not subscribe to
    assert subscription["updated"] == [subscription["uri"]]
    after = _resource_json(report["factAfterRetract"])
    assert after["state"] == "retracted"
    assert [e["kind"] for e in after["events"]] == ["assert", "retract"]


def test_completions_from_the_ledger(run: tuple[dict[str, Any], Path]) -> None:
    report, _ = run
    fact = report["write"]["structuredContent"]["fact"]
    completions = report["completions"]
    assert completions["factId"]["completion"]["values"] == [fact["factId"]]
    assert completions["subject"]["completion"]["values"] == [fact["subject"]]
    assert completions["subject"]["completion"]["hasMore"] is False


def test_http_refuses_a_client_without_the_token(run: tuple[dict[str, Any], Path]) -> None:
    report, _ = run
    if report["transport"] != "http":
        pytest.skip("stdio has no token: the spawning process is the gateway")
    assert report["withoutToken"]["refused"] is True
    assert "unauthorized" in report["withoutToken"]["error"]

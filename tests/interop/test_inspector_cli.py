"""The MCP Inspector's CLI (``mcp-inspector --cli``) against the memory server over stdio.

Each call is one Inspector run that spawns ``agent-custody-memory serve --ledger FILE`` itself,
as its users do: list the tools (and their schemas' portability, ``--strict``), call
``memory.write`` and ``memory.read`` as the gateway (``--tool-metadata``), be refused without a
receipt (the ledger left byte-identical), list the resources and read a fact and a subject.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from .nodeclients import assert_tools_as_declared, ledger_events, run_json

LAUNCHER = ("@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
GATEWAY = ["agent-custody/receipt=rcpt-inspector", "agent-custody/agent=inspector-agent"]


class Inspector:
    """``mcp-inspector --cli`` with the memory server on one ledger as its stdio target."""

    def __init__(self, node: Path, modules: Path, cli: Path, ledger: Path) -> None:
        self.base = [str(node), str(modules.joinpath(*LAUNCHER)), "--cli"]
        self.target = [str(cli), "serve", "--ledger", str(ledger)]

    def __call__(
        self, method: str, *args: str, status: int = 0, meta: list[str] | None = None
    ) -> Any:
        extra = ["--metadata", *meta] if meta else []
        report, _ = self.run(method, *args, *extra, status=status)
        return report

    def run(self, method: str, *args: str, status: int = 0) -> tuple[Any, Any]:
        return run_json([*self.base, *self.target, "--method", method, *args], status=status)

    def call(self, tool: str, *arguments: str, meta: list[str] | None = None) -> Any:
        extra = ["--tool-metadata", *meta] if meta else []
        args = ["--tool-name", tool, "--tool-arg", *arguments, *extra]
        return self("tools/call", *args, status=0 if meta else 5)  # 5: the tool said isError


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("inspector") / "ledger.jsonl"


@pytest.fixture(scope="module")
def inspector(node: Path, node_modules: Path, memory_cli: Path, ledger: Path) -> Inspector:
    return Inspector(node, node_modules, memory_cli, ledger)


def _text_json(result: dict[str, Any]) -> Any:
    return json.loads(result["content"][0]["text"])


def test_tools_list_shows_every_tool_as_declared(inspector: Inspector) -> None:
    assert_tools_as_declared(inspector("tools/list")["tools"])


def test_tool_schemas_have_no_portability_errors(inspector: Inspector) -> None:
    # --strict exits 6 on an error-severity problem; warnings (nullable `type` arrays) are allowed
    _, done = inspector.run("tools/list", "--strict")
    assert re.search(r"(?<!\d)0 errors, \d+ warnings", done.stderr), done.stderr


def test_a_call_without_a_receipt_is_refused_and_changes_nothing(
    inspector: Inspector, ledger: Path
) -> None:
    before = ledger.read_bytes() if ledger.exists() else None
    refused = inspector.call(
        "memory.write", "subject=acct:x", "predicate=p", "value=1", "space=org"
    )
    assert refused["isError"] is True
    assert "receipt" in refused["structuredContent"]["error"]
    assert (ledger.read_bytes() if ledger.exists() else None) == before


def test_write_read_and_resources(inspector: Inspector, ledger: Path) -> None:
    written = inspector.call(
        "memory.write",
        "subject=acct:inspector",
        "predicate=plan",
        'value={"tier": "team"}',
        "space=org",
        meta=GATEWAY,
    )
    assert written["isError"] is False
    fact = written["structuredContent"]["fact"]
    assert (fact["provenance"], fact["actor"]) == ("attested", "inspector-agent")
    assert fact["value"] == {"tier": "team"}
    assert _text_json(written) == written["structuredContent"]

    read = inspector.call("memory.read", "subject=acct:inspector", meta=GATEWAY)
    assert read["_meta"]["agent-custody/facts"] == [fact["factId"]]
    assert [f["value"] for f in read["structuredContent"]["facts"]] == [{"tier": "team"}]

    # Resources are the gateway's too: a request without its receipt is refused.
    listed = [r["uri"] for r in inspector("resources/list", meta=GATEWAY)["resources"]]
    assert listed == ["memory://ledger/head", "memory://subject/acct%3Ainspector"]
    templates = inspector("resources/templates/list")["resourceTemplates"]
    assert {t["uriTemplate"] for t in templates} == {
        "memory://fact/{factId}",
        "memory://subject/{subject}",
    }
    uri = f"memory://fact/{fact['factId']}"
    [shown] = inspector("resources/read", "--uri", uri, meta=GATEWAY)["contents"]
    assert json.loads(shown["text"])["fact"] == _public(ledger_events(ledger)[-1]["fact"])
    [timeline] = inspector("resources/read", "--uri", listed[1], meta=GATEWAY)["contents"]
    assert [f["factId"] for f in json.loads(timeline["text"])["facts"]] == [fact["factId"]]


def _public(fact: dict[str, Any]) -> dict[str, Any]:
    """A ledger line's fact without the value commitment the ledger keeps for itself."""
    return {k: v for k, v in fact.items() if k not in {"valueSalt", "valueCommitment"}}

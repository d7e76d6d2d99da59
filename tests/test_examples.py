"""Every example in examples/ runs as its README says (``nox -s examples``).

- ``python_api.py`` runs to the end (it asserts each claim it prints) and prints them;
- ``memory.toml`` is served (a copy, so its ledger lands in a temporary folder) and both of its
  stores take a write, give up a superseded value and a forgotten one, verified;
- ``langgraph_agent.py`` converses with the memory server over MCP, and the ledger afterwards
  holds what the conversation said: two claimed facts, the second superseding the first;
- each client snippet in ``examples/clients`` has its client's shape, and the command it names
  starts the memory server (``tools/list`` gives the ten tools; a direct write is claimed, as
  ``clients/README.md`` says); the ``claude mcp add`` line names the same command.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from agent_custody_state import Ledger
from agent_custody_state_conformance.gateway import GatewayClient

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
CLIENTS = sorted((EXAMPLES / "clients").glob("*.json"))
TOOLS = {"memory.write", "memory.read", "memory.confirm", "memory.retract", "memory.forget",
         "memory.hold", "memory.release", "memory.sweep", "memory.get", "memory.history"}  # fmt: skip
# The top-level key each client reads its servers from, and the keys it knows in an entry.
SHAPES = {
    "claude-desktop.json": ("mcpServers", {"command", "args", "env"}),
    "claude-code.json": ("mcpServers", {"type", "command", "args", "env"}),
    "cursor.json": ("mcpServers", {"command", "args", "env"}),
    "vscode.json": ("servers", {"type", "command", "args", "env", "envFile"}),
}


def run_example(*args: str, cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_every_example_is_listed_and_tested() -> None:
    readme = (EXAMPLES / "README.md").read_text()
    for path in EXAMPLES.iterdir():
        if path.name != "README.md" and not path.name.startswith("."):
            assert f"]({path.name}" in readme, f"examples/README.md does not list {path.name}"
    assert "agent-custody-memory serve --config examples/memory.toml" in readme
    assert set(SHAPES) == {p.name for p in CLIENTS}, "a client snippet without a SHAPES entry"


def test_python_api(tmp_path: Path) -> None:
    out = run_example(str(EXAMPLES / "python_api.py"), cwd=tmp_path)
    lines = [" ".join(line.split()) for line in out.splitlines()]
    for expected in (
        "believed now: plan='enterprise'",
        "true on 2026-02-01: plan='pro'",
        "believed when 'pro' was written: plan='pro'",
        "after retracting 'enterprise': plan='pro'",
        "the events about 'pro' are kept: assert -> assert -> hold -> release -> forget",
        "superseded; the store holds: ['Porto']",
        "the old value is back in the store: ['Lisbon']",
        "the store holds: []",
        "done.",
    ):
        assert expected in lines, f"{expected!r} not printed:\n{out}"
    assert any(line.startswith("forget under a legal hold is refused: on_hold:") for line in lines)
    assert any("keeps a digest: hmac-sha256 " in line for line in lines)
    assert list(tmp_path.iterdir()) == [], "the example leaves nothing behind"


def test_memory_toml_serves_two_stores(tmp_path: Path) -> None:
    config = tmp_path / "memory.toml"
    shutil.copy(EXAMPLES / "memory.toml", config)
    errlog = tmp_path / "server.log"

    async def scenario() -> None:
        with errlog.open("w") as err:
            async with GatewayClient.stdio("serve", "--config", str(config), errlog=err) as gw:
                args = {"subject": "acct:42", "predicate": "plan", "space": "org"}
                first = (await gw.call("memory.write", {**args, "value": "pro"})).data
                assert set(first["fact"]["external"]) == {"notes", "langmem"}
                second = await gw.call(
                    "memory.write",
                    {**args, "value": "enterprise", "supersedes": first["fact"]["factId"]},
                )
                assert second.data["mirror"]["verification"] == {
                    "notes": "verified",
                    "langmem": "verified",
                }, "the superseded value leaves both stores"
                read = (await gw.call("memory.read", {"subject": "acct:42"})).data
                assert [f["value"] for f in read["facts"]] == ["enterprise"]
                fact_id = second.data["fact"]["factId"]
                forget = (await gw.call("memory.forget", {"factId": fact_id, "reason": "t"})).data
                assert forget["verification"] == {"notes": "verified", "langmem": "verified"}

    anyio.run(scenario)
    startup = errlog.read_text()
    assert "stores: notes, langmem" in startup, startup
    assert (tmp_path / "ledger.sqlite").exists(), "the ledger is relative to the config file"


def test_langgraph_agent(tmp_path: Path) -> None:
    ledger_path = tmp_path / "ledger.sqlite"
    out = run_example(
        str(EXAMPLES / "langgraph_agent.py"), "--ledger", str(ledger_path), cwd=tmp_path
    )
    replies = [
        line.removeprefix("agent: ") for line in out.splitlines() if line.startswith("agent:")
    ]
    assert replies == [
        "Noted: Lisbon.",
        "You live in Lisbon.",
        "Noted: Porto (it replaces what I had).",
        "I already knew: Porto.",
        "You live in Porto.",
    ], out
    with Ledger(ledger_path) as ledger:
        asserts = [e for e in ledger.export() if e.kind == "assert"]
        assert [(e.fact.value, e.fact.provenance) for e in asserts] == [
            ("Lisbon", "claimed"),
            ("Porto", "claimed"),
        ], "one write per new value, direct writes are claimed"
        assert asserts[1].supersedes == asserts[0].fact_id
        assert [f.value for f in ledger.as_of(subject="user:7", predicate="city")] == ["Porto"]


def _server(snippet: Path) -> tuple[str, dict[str, Any]]:
    key, known = SHAPES[snippet.name]
    data = json.loads(snippet.read_text())
    assert list(data) == [key], f"{snippet.name}: top-level key {key!r}"
    [(name, entry)] = data[key].items()
    assert set(entry) <= known, f"{snippet.name}: keys {sorted(set(entry) - known)} unknown"
    assert entry.get("type", "stdio") == "stdio"
    assert entry["command"] == "agent-custody-memory"
    assert all(isinstance(a, str) for a in entry["args"])
    assert entry["args"][0] == "serve" and "--allow-direct" in entry["args"]
    ledger = entry["args"][entry["args"].index("--ledger") + 1]
    assert ledger.endswith(".sqlite"), ledger
    return name, entry


@pytest.mark.parametrize("snippet", CLIENTS, ids=[p.stem for p in CLIENTS])
def test_client_snippet_starts_the_server(snippet: Path, tmp_path: Path) -> None:
    _, entry = _server(snippet)
    command = shutil.which(entry["command"])
    assert command is not None, f"{entry['command']} is not on PATH"
    args = list(entry["args"])
    args[args.index("--ledger") + 1] = str(tmp_path / "ledger.sqlite")  # the placeholder
    params = StdioServerParameters(command=command, args=args, env=dict(os.environ))

    async def scenario() -> None:
        with (tmp_path / "server.log").open("w") as err:
            async with stdio_client(params, errlog=err) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    names = {tool.name for tool in (await session.list_tools()).tools}
                    assert names == TOOLS
                    fact = {
                        "subject": "me",
                        "predicate": "editor",
                        "value": "vim",
                        "space": "user:me",
                    }
                    written = await session.call_tool("memory.write", fact)
                    assert not written.is_error, written
                    assert _json(written)["fact"]["provenance"] == "claimed"
                    hidden = await session.call_tool("memory.read", {"subject": "me"})
                    assert _json(hidden)["facts"] == [], "claimed facts are quarantined"
                    shown = await session.call_tool(
                        "memory.read", {"subject": "me", "includeClaimed": True}
                    )
                    assert [f["value"] for f in _json(shown)["facts"]] == ["vim"]

    anyio.run(scenario)


def _json(result: types.CallToolResult) -> Any:
    return json.loads(next(c.text for c in result.content if isinstance(c, types.TextContent)))


def test_claude_mcp_add_matches_the_snippet() -> None:
    readme = (EXAMPLES / "clients" / "README.md").read_text()
    [line] = [line for line in readme.splitlines() if line.startswith("claude mcp add ")]
    words = shlex.split(line)
    split = words.index("--")
    name, entry = _server(EXAMPLES / "clients" / "claude-code.json")
    assert words[split - 1] == name and "--scope" in words[:split]
    assert words[words.index("--scope") + 1] == "project", "project scope writes .mcp.json"
    assert words[split + 1 :] == [entry["command"], *entry["args"]]

"""docs/clients.md as a reader uses it: every JSON snippet parses; a stdio snippet is exactly the
file in examples/clients (whose command test_examples.py starts with the official client); the
HTTP server is started with the command line the page gives, and each HTTP snippet's URL and
headers (its token placeholder filled from the environment, as the client would) reach it with
the official client over Streamable HTTP; the ``claude mcp add`` lines match their snippets."""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state_conformance.gateway import GatewayClient

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "clients.md").read_text()
SNIPPET = re.compile(r"<!-- client: (\S+) (stdio|http) -->.*?```json\n(.*?)```", re.S)
SNIPPETS = {(name, mode): json.loads(body) for name, mode, body in SNIPPET.findall(DOC)}
PLACEHOLDERS = ("${MEMORY_TOKEN}", "${env:MEMORY_TOKEN}", "${input:memory-token}")


def _entry(data: dict[str, Any]) -> dict[str, Any]:
    [entry] = (data.get("mcpServers") or data["servers"]).values()
    return entry  # type: ignore[no-any-return]


def test_every_client_has_both_transports_or_says_why() -> None:
    assert set(SNIPPETS) == {
        ("claude-desktop", "stdio"),
        ("claude-code", "stdio"),
        ("cursor", "stdio"),
        ("vscode", "stdio"),
        ("claude-code", "http"),
        ("cursor", "http"),
        ("vscode", "http"),
    }
    assert "Claude Desktop's configuration file takes stdio servers only" in DOC


@pytest.mark.parametrize("name", ["claude-desktop", "claude-code", "cursor", "vscode"])
def test_stdio_snippets_are_the_tested_example_files(name: str) -> None:
    example = json.loads((ROOT / "examples" / "clients" / f"{name}.json").read_text())
    assert SNIPPETS[(name, "stdio")] == example


def test_claude_mcp_add_lines_match_their_snippets() -> None:
    lines = re.findall(r"`(claude mcp add [^`]+)`", DOC)
    stdio, http = (shlex.split(line) for line in lines)
    entry = _entry(SNIPPETS[("claude-code", "stdio")])
    assert stdio[stdio.index("--") + 1 :] == [entry["command"], *entry["args"]]
    remote = _entry(SNIPPETS[("claude-code", "http")])
    assert http[http.index("--transport") + 1] == remote["type"] == "http"
    assert remote["url"] in http
    header = http[http.index("--header") + 1]
    name, value = header.split(": ", 1)
    assert remote["headers"] == {name: value}


def _server_command(ledger: Path) -> list[str]:
    [line] = [
        line for line in DOC.splitlines() if line.startswith("agent-custody-memory serve --http")
    ]
    words = shlex.split(line)
    words[words.index("--port") + 1] = "0"  # any free port, not the documented 8790
    words[words.index("--ledger") + 1] = str(ledger)
    command = shutil.which(words[0])
    assert command is not None, f"{words[0]} is not on PATH"
    return [command, *words[1:]]


def _start(command: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    deadline, seen = time.monotonic() + 60, []
    while time.monotonic() < deadline and (line := proc.stderr.readline()):
        seen.append(line)
        if match := re.search(r"serving (http://\S+/mcp);", line):
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, match.group(1)
    proc.kill()
    raise AssertionError("the server did not start:\n" + "".join(seen))


def test_http_snippets_reach_the_documented_server(tmp_path: Path) -> None:
    token = secrets.token_urlsafe(16)
    env = {**os.environ, "MEMORY_TOKEN": token}
    proc, url = _start(_server_command(tmp_path / "ledger.sqlite"), env)
    try:
        for name in ("claude-code", "cursor", "vscode"):
            entry = _entry(SNIPPETS[(name, "http")])
            assert entry["url"] == "http://127.0.0.1:8790/mcp"
            headers = dict(entry["headers"])
            for placeholder in PLACEHOLDERS:
                headers = {k: v.replace(placeholder, token) for k, v in headers.items()}
            assert headers == {"Authorization": f"Bearer {token}"}, name
            anyio.run(_write_and_read, url, headers, name)
        anyio.run(_refused_without_token, url)
    finally:
        proc.terminate()
        proc.wait(10)


async def _write_and_read(url: str, headers: dict[str, str], name: str) -> None:
    async with GatewayClient.http(url, headers=headers) as client:
        fact = {"subject": f"user:{name}", "predicate": "editor", "value": "vim", "space": "u"}
        written = await client.direct("memory.write", fact)
        assert not written.is_error, written.text
        assert written.data["fact"]["provenance"] == "claimed"
        shown = await client.direct(
            "memory.read", {"subject": f"user:{name}", "includeClaimed": True}
        )
        assert [f["value"] for f in shown.data["facts"]] == ["vim"]


async def _refused_without_token(url: str) -> None:
    with pytest.raises(Exception):  # noqa: B017 - the client raises its transport's 401 error
        async with GatewayClient.http(url):
            pass

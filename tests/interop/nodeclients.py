"""What the interop tests share: where things are, running a Node client, reading the ledger."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from agent_custody_state.server.outputs import output_schema, tool_annotations
from agent_custody_state.server.tools import TOOL_NAMES, TOOLS

HERE = Path(__file__).parent
#: The memory CLI of the environment running the tests (the one its users start).
MEMORY_CLI = Path(sys.executable).with_name("agent-custody-memory")


def run_json(
    command: list[str], *, status: int = 0, timeout: float = 120
) -> tuple[Any, subprocess.CompletedProcess[str]]:
    """Run a Node client that must exit with ``status``; its stdout parsed as JSON, and the
    finished process (for stderr)."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=HERE)
    assert done.returncode == status, f"{command[:3]} exited {done.returncode}:\n{done.stderr}"
    try:
        return json.loads(done.stdout), done
    except ValueError:
        raise AssertionError(f"not JSON on stdout:\n{done.stdout}\n{done.stderr}") from None


def ledger_events(path: Path) -> list[dict[str, Any]]:
    """The JSONL ledger's events as the TypeScript original would read them."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def assert_tools_as_declared(listed: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A client's ``tools/list`` shows the ten tools exactly as the server declares them:
    annotations, output and input schemas, nothing dropped or added on the way. By name."""
    tools = {tool["name"]: tool for tool in listed}
    assert sorted(tools) == sorted(TOOL_NAMES)
    for name, _, input_schema in TOOLS:
        wanted = tool_annotations(name, has_stores=False).model_dump(
            by_alias=True, exclude_none=True
        )
        assert tools[name]["annotations"] == wanted, name
        assert tools[name]["outputSchema"] == output_schema(name), name
        assert tools[name]["inputSchema"] == input_schema, name
    reads = {name for name, tool in tools.items() if tool["annotations"]["readOnlyHint"]}
    assert reads == {"memory.read", "memory.get", "memory.history"}
    return tools

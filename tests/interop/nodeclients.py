"""What the interop tests share: where things are, running a Node client, reading the ledger."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
#: The memory CLI of the environment running the tests (the one its users start).
MEMORY_CLI = Path(sys.executable).with_name("agent-custody-memory")


def run_json(
    command: list[str], timeout: float = 120
) -> tuple[Any, subprocess.CompletedProcess[str]]:
    """Run a Node client; its stdout parsed as JSON, and the finished process (for stderr)."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=HERE)
    assert done.returncode == 0, f"{command[:3]} exited {done.returncode}:\n{done.stderr}"
    try:
        return json.loads(done.stdout), done
    except ValueError:
        raise AssertionError(f"not JSON on stdout:\n{done.stdout}\n{done.stderr}") from None


def ledger_events(path: Path) -> list[dict[str, Any]]:
    """The JSONL ledger's events as the TypeScript original would read them."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

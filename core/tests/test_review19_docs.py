"""Nineteenth review: the documentation's shell commands, run as a newcomer runs them.

- ``demo`` whose memory server stops at startup (an ``AGENT_CUSTODY_*`` variable it refuses)
  printed the server's ``error:`` line, then 130 lines of the MCP client's traceback of the
  closed connection; it now ends with one ``error:`` line (exit 1), as every command does.
"""

from __future__ import annotations

import os
import subprocess
import sys


def test_demo_whose_server_stops_at_startup_is_one_error_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agent_custody_state", "demo", "--color", "never"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "AGENT_CUSTODY_RETENTION": "org=P1X"},
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert any("invalid retention duration 'P1X'" in line for line in lines), done.stderr
    assert lines[-1].startswith("error: the demo's memory server stopped"), lines[-1]
    assert all(line.startswith("error: ") for line in lines), lines

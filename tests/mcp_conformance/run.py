"""Run the official MCP conformance suite's server scenarios against ``serve --http``.

Usage: ``python tests/mcp_conformance/run.py --node NODE --suite-js INDEX_JS [--scenario NAME]``
(the ``mcp_conformance`` nox session installs both and calls this). A fresh JSONL ledger in a
temporary folder, the server on a free loopback port without a token and with
``--allow-direct`` (what a local client without the gateway uses), then ``conformance server --url ... --expected-failures baseline.yml``: scenarios that do
not apply to the memory server are listed in ``baseline.yml``; every other one must pass, and a
listed one that passes fails the run (the list stays exact). Exits with the suite's status.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BASELINE = Path(__file__).with_name("baseline.yml")


def start_server(folder: Path) -> tuple[subprocess.Popen[str], str]:
    # The suite is a direct client (no gateway, no receipts): --allow-direct admits it, its
    # writes quarantined, as a local client without the gateway is.
    command = [
        *(sys.executable, "-m", "agent_custody_state", "serve", "--http", "--port", "0"),
        "--allow-direct",
    ]
    proc = subprocess.Popen(
        [*command, "--ledger", str(folder / "ledger.jsonl")], stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        match = re.search(r"serving (http://\S+/mcp);", line)
        if match:
            # keep draining stderr so the server never blocks on a full pipe
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, match.group(1)
    proc.kill()
    raise SystemExit("the memory server did not start")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--node", required=True)
    parser.add_argument("--suite-js", required=True)
    parser.add_argument("--scenario")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        proc, url = start_server(folder)
        try:
            node, suite = (str(Path(p).resolve()) for p in (args.node, args.suite_js))
            command = [node, suite, "server", "--url", url]
            if args.scenario:
                command += ["--scenario", args.scenario]
            else:
                command += ["--expected-failures", str(BASELINE)]
            return subprocess.run(command, cwd=folder, timeout=900).returncode
        finally:
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    raise SystemExit(main())

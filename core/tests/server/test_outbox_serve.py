"""The outbox at start (``stores.outbox``): ``serve`` (stdio and HTTP) and ``sweep --config``
finish the store removals a killed process left owed, and drop those whose ledger change never
committed. The crash is real: a child process runs the forget flow and ends with ``os._exit``
inside the store's removal (after the ledger's commit) or inside the ledger's forget (before).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from servertest import CLI, run_cli, start_http

from agent_custody_state import Ledger
from agent_custody_state.stores.outbox import Outbox

CRASH = """
import os, sys, anyio
from agent_custody_state import AssertRequest, Ledger
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore

location, when = sys.argv[1], sys.argv[2]

async def main():
    store = InProcessStore("vectors")
    with Ledger(location) as ledger:
        custody = Custody(ledger, [store], outbox=location + ".outbox")
        request = AssertRequest(subject="s", predicate="p", value="v", space="org", actor="a")
        fact_id = (await custody.write(request)).event.fact_id
        print(fact_id, flush=True)

        async def die(*args):
            os._exit(3)

        if when == "after":
            store.remove = die
        else:
            ledger.forget = lambda **kwargs: os._exit(3)
        await custody.forget(fact_id=fact_id, actor="dpo", reason="gdpr")

anyio.run(main)
"""

CONFIG = """
ledger = "ledger.jsonl"

[[stores]]
name = "vectors"
type = "memory"
"""


def crashed(tmp_path: Path) -> tuple[Path, str, str]:
    """A config, and a ledger whose outbox holds one forget committed before the kill and one
    killed before its commit."""
    location = tmp_path / "ledger.jsonl"
    ids = []
    for when in ("after", "before"):
        child = subprocess.run(
            [sys.executable, "-c", CRASH, str(location), when], capture_output=True, text=True
        )
        assert child.returncode == 3, child.stderr
        ids.append(child.stdout.strip())
    assert sorted(o.fact_id for o in Outbox(f"{location}.outbox").pending()) == sorted(ids)
    config = tmp_path / "memory.toml"
    config.write_text(CONFIG)
    return config, ids[0], ids[1]


def check_resumed(tmp_path: Path, output: str, forgotten: str, kept: str) -> None:
    assert "owed store removals of 1 facts (0 removals not verified)" in output
    assert "dropped 1 entries whose ledger change never committed" in output
    assert not (tmp_path / "ledger.jsonl.outbox").exists()
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        assert ledger.get(forgotten).forgotten is not None  # type: ignore[union-attr]
        assert ledger.get(kept).forgotten is None  # type: ignore[union-attr]


def test_serve_over_stdio_resumes_the_outbox_at_start(tmp_path: Path) -> None:
    config, forgotten, kept = crashed(tmp_path)
    done = subprocess.run(
        [*CLI, "serve", "--config", str(config)], input="", capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    check_resumed(tmp_path, done.stderr, forgotten, kept)


def test_serve_over_http_resumes_the_outbox_before_it_listens(tmp_path: Path) -> None:
    config, forgotten, kept = crashed(tmp_path)
    server = start_http("--config", str(config), "--token-env", "MEMORY_TOKEN")
    try:
        check_resumed(tmp_path, "".join(server.lines), forgotten, kept)
    finally:
        server.stop()


def test_sweep_with_the_config_resumes_the_outbox_first(tmp_path: Path) -> None:
    config, forgotten, kept = crashed(tmp_path)
    done = run_cli(
        "sweep", "--config", str(config), "--before", "2000-01-01T00:00:00Z", "--reason", "r"
    )
    assert done.returncode == 0, done.stderr
    check_resumed(tmp_path, done.stderr, forgotten, kept)


def test_a_url_ledger_with_stores_and_no_outbox_warns_once(tmp_path: Path) -> None:
    config = tmp_path / "memory.toml"
    config.write_text(CONFIG.replace("ledger.jsonl", "memory:"))
    done = subprocess.run(
        [*CLI, "serve", "--config", str(config)], input="", capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("removals interrupted by a crash cannot be resumed") == 1
    config.write_text(f'outbox = "removals.outbox"\n{config.read_text()}')
    done = subprocess.run(
        [*CLI, "serve", "--config", str(config)], input="", capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "cannot be resumed" not in done.stderr

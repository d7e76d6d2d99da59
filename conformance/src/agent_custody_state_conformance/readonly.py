"""Checks that a read-only open changes nothing, for a backend whose ledger is files in a folder:
the folder's listing with each file's SHA-256 (``folder_files``), and every CLI command that only
reads, run on the ledger (``READ_COMMANDS``, ``run_read_command``)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from agent_custody_state.cli import main

#: Commands that only read, with their arguments (``FACT``: a fact id; ``OUT``: an output file).
READ_COMMANDS: list[list[str]] = [
    ["facts"],
    ["history", "FACT"],
    ["timeline", "s"],
    ["show", "FACT"],
    ["export", "--out", "OUT"],
    ["verify"],
    ["sweep", "--before", "2999-01-01T00:00:00Z", "--reason", "r", "--dry-run"],
]


def folder_files(folder: Path) -> dict[str, str]:
    """Every file of ``folder`` (the listing: a new ``-wal``, ``.lock`` or sidecar shows) with
    the SHA-256 of its bytes."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def run_read_command(command: list[str], ledger: Path, fact_id: str, out: Path) -> int:
    """``agent-custody-memory <command> --ledger <ledger>`` in this process; its exit code."""
    words = {"FACT": fact_id, "OUT": str(out)}
    return main([*(words.get(w, w) for w in command), "--ledger", str(ledger)])

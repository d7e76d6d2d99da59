"""Checks that a read-only open changes nothing, for a backend whose ledger is files in a folder:
the folder's listing with each file's SHA-256 (``folder_files``), every CLI command that only
reads, run on the ledger (``READ_COMMANDS``, ``run_read_command``), and every write method of
``Ledger`` (``WRITES``: each must be refused)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_custody_state import Ledger
from agent_custody_state.cli import main

FACT: dict[str, Any] = {"subject": "s", "predicate": "p", "space": "o", "actor": "a"}
#: Every write method of ``Ledger``, called on a fact id of the ledger.
WRITES: dict[str, Callable[[Ledger, str], Any]] = {
    "assert_fact": lambda led, _: led.assert_fact(**FACT, value="new"),
    "supersede": lambda led, fid: led.assert_fact(**FACT, value="newer", supersedes=fid),
    "assert_many": lambda led, _: led.assert_many([{**FACT, "value": "many"}]),
    "import_events": lambda led, _: led.import_events([]),
    "retract": lambda led, fid: led.retract(fact_id=fid, actor="a", reason="r"),
    "confirm": lambda led, fid: led.confirm(fact_id=fid, actor="a"),
    "forget": lambda led, fid: led.forget(fact_id=fid, actor="a", reason="r"),
    "hold": lambda led, fid: led.hold(fact_id=fid, actor="a", reason="r"),
    "release": lambda led, fid: led.release(fact_id=fid, actor="a", reason="r"),
    "sweep": lambda led, _: led.sweep(before="2999-01-01T00:00:00Z", actor="a", reason="r"),
    "checkpoint": lambda led, _: led.checkpoint(),
    "compact": lambda led, _: led.compact(),
}


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

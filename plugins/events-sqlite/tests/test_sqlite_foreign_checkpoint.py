"""``verify`` of a SQLite ledger against a checkpoint signed for another ledger: the ledger's
origin is read through the backend (its first event), and the checkpoint is named as another
ledger's, never as a rewrite of this one's events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main
from agent_custody_state.server.signing import generate_key_pair

FACT = {"predicate": "plan", "space": "org", "actor": "agent"}


def test_a_checkpoint_of_another_sqlite_ledger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    private, public, _ = generate_key_pair(tmp_path / "keys" / "memory.key")
    ours, theirs = tmp_path / "ours.sqlite", tmp_path / "theirs.sqlite"
    for path in (ours, theirs):
        with Ledger(path, checkpoint_key=private, checkpoints=f"{path}.cp") as ledger:
            for i in range(4):
                ledger.assert_fact(**FACT, subject=f"s{i}", value=i)
            ledger.checkpoint()
    argv = ["verify", "--ledger", str(ours), "--key", str(public), "--json"]
    assert main([*argv, "--checkpoint", f"{ours}.cp"]) == 0
    assert json.loads(capsys.readouterr().out)["checkpoints"] == 1
    assert main([*argv, "--checkpoint", f"{theirs}.cp"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["problemCount"] == 1 and data["firstBad"]["seq"] == 4
    assert "was signed for another ledger" in data["firstBad"]["reason"]

"""The core's inspection commands on a SQLite ledger: the memory tools' JSON, read only (the main
file byte-identical, no sidecar left), and a missing file never created."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main


def _seed(path: Path) -> tuple[str, str]:
    with Ledger(path) as ledger:
        old = ledger.assert_fact(
            subject="user:1", predicate="plan", value="pro", space="org", actor="a",
            valid_from="2025-01-01T00:00:00Z",
        )  # fmt: skip
        new = ledger.assert_fact(
            subject="user:1", predicate="plan", value="team", space="org", actor="a",
            supersedes=old.fact_id, valid_from="2025-06-01T00:00:00Z",
        )  # fmt: skip
        ledger.hold(fact_id=new.fact_id, actor="legal", reason="case")
        return old.fact_id, new.fact_id


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> object:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_inspect_commands_on_sqlite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ledger.sqlite"
    old, new = _seed(path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with Ledger(path) as ledger:
        expected_facts = [f.to_dict() for f in ledger.as_of()]
        expected_history = [e.to_dict() for e in ledger.history(old)]
    assert before == {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    loc = ("--ledger", str(path))
    assert _json(capsys, "facts", *loc, "--json") == {"facts": expected_facts}
    assert [f["factId"] for f in expected_facts] == [new]
    assert _json(capsys, "history", old, *loc, "--json") == {"events": expected_history}
    timeline = _json(capsys, "timeline", "user:1", *loc, "--json")
    assert timeline["states"] == {old: "superseded", new: "current"}  # type: ignore[index]
    assert timeline["held"] == [new]  # type: ignore[index]
    shown = _json(capsys, "show", old, *loc, "--json")
    assert shown["validTo"] == "2025-06-01T00:00:00.000Z" and shown["retracted"] is False  # type: ignore[index]
    assert main(["timeline", "user:1", *loc]) == 0
    assert "superseded" in capsys.readouterr().out
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


@pytest.mark.parametrize("command", [["facts"], ["timeline", "user:1"], ["show", "f"]])
def test_a_missing_sqlite_ledger_is_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    assert main([*command, "--ledger", str(tmp_path / "typo.sqlite")]) == 1
    assert "no such ledger" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []

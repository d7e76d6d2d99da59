"""``facts``, ``history``, ``timeline``, ``show``: tables, the memory tools' JSON, exit codes, bad
input, and no byte of the ledger changed (issue 14.1). SQLite and PostgreSQL run the same
commands in their plugin folders (``test_cli_inspect.py`` there)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main
from agent_custody_state.server.service import MemoryService


def _ticking_clock() -> Callable[[], datetime]:
    """One second per read: every event is learned at its own instant, so the ``--tx-at``
    assertions below cannot meet two events stamped in the same millisecond."""
    ticks = itertools.count()
    start = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    return lambda: start + timedelta(seconds=next(ticks))


def _seed(path: Path) -> dict[str, str]:
    with Ledger(path, clock=_ticking_clock()) as ledger:
        pro = ledger.assert_fact(
            subject="user:42",
            predicate="plan",
            value="pro",
            space="org",
            actor="agent-a",
            receipt_id="rcpt-1",
            valid_from="2025-01-01T00:00:00Z",
        )
        ent = ledger.assert_fact(
            subject="user:42",
            predicate="plan",
            value={"tier": "enterprise", "seats": 5},
            space="org",
            actor="agent-b",
            supersedes=pro.fact_id,
            valid_from="2025-06-01T00:00:00Z",
        )
        mail = ledger.assert_fact(
            subject="user:42",
            predicate="email",
            value="a@example.com",
            space="team:support",
            actor="agent-a",
            valid_from="2025-02-01T00:00:00Z",
        )
        other = ledger.assert_fact(
            subject="user:7",
            predicate="plan",
            value="[bold]free[/bold]",  # rich markup must be printed, not interpreted
            space="org",
            actor="agent-a",
            valid_from="2025-01-01T00:00:00Z",
        )
        ledger.confirm(fact_id=other.fact_id, actor="reviewer", receipt_id="rcpt-2")
        ledger.hold(fact_id=mail.fact_id, actor="legal", reason="case 12")
        ledger.retract(fact_id=ent.fact_id, actor="ops", reason="wrong tier")
        return {
            "pro": pro.fact_id,
            "ent": ent.fact_id,
            "mail": mail.fact_id,
            "other": other.fact_id,
        }


@pytest.fixture
def seeded(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    path = tmp_path / "ledger.jsonl"
    return path, _seed(path)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _tool(path: Path, name: str, arguments: dict[str, Any]) -> Any:
    """What the memory tool answers on the same ledger (the real service, not a copy)."""
    with Ledger(path) as ledger:
        service = MemoryService.build(ledger, require_gateway=False)
        try:
            result = anyio.run(service.call, name, arguments, None, "direct")
        finally:
            service.close()
    assert not result.is_error, result.texts
    return json.loads(result.texts[0])


def test_facts_json_is_memory_read(
    seeded: tuple[Path, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, ids = seeded
    code, out, _ = _run(capsys, "facts", "--ledger", str(path), "--json")
    assert code == 0
    assert json.loads(out) == _tool(path, "memory.read", {"includeClaimed": True})
    assert [f["factId"] for f in json.loads(out)["facts"]] == [
        ids["pro"],
        ids["mail"],
        ids["other"],
    ]
    code, out, _ = _run(capsys, "facts", "--ledger", str(path), "--json", "--include", "attested")
    assert json.loads(out) == _tool(path, "memory.read", {})  # memory.read's default
    assert [f["factId"] for f in json.loads(out)["facts"]] == [ids["other"]]


def _fact_ids(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    code, out, err = _run(capsys, *argv)
    assert code == 0, err
    return [f["factId"] for f in json.loads(out)["facts"]]


def test_facts_filters_and_both_time_axes(
    seeded: tuple[Path, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, ids = seeded
    with Ledger(path) as ledger:
        learned = {e.fact_id: e.tx_time for e in ledger.export() if e.kind == "assert"}
    argv = ["facts", "--ledger", str(path), "--json", "--subject", "user:42", "--predicate", "plan"]
    # Valid time: in March 2025 the pro plan was believed (the enterprise one is retracted).
    assert _fact_ids(capsys, *argv, "--valid-at", "2025-03-01T00:00:00+01:00") == [ids["pro"]]
    # Transaction time: before the retraction was learned, enterprise superseded pro in July.
    july = ("--valid-at", "2025-07-01T00:00:00Z")
    assert _fact_ids(capsys, *argv, *july, "--tx-at", learned[ids["ent"]]) == [ids["ent"]]
    assert _fact_ids(capsys, *argv, *july, "--tx-at", learned[ids["pro"]]) == [ids["pro"]]
    space = ("--space", "team:support")
    assert _fact_ids(capsys, "facts", "--ledger", str(path), "--json", *space) == [ids["mail"]]


def test_facts_table(
    seeded: tuple[Path, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, ids = seeded
    code, out, err = _run(capsys, "facts", "--ledger", str(path))
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith("3 facts believed valid at ") and lines[0].endswith("(all)")
    header = next(line for line in lines if "predicate" in line)
    assert header.split() == [
        "fact", "subject", "predicate", "value", "space", "provenance", "valid", "from", "valid", "to"
    ]  # fmt: skip
    row = next(line for line in lines if ids["other"] in line)
    assert row.split() == [
        ids["other"], "user:7", "plan", '"[bold]free[/bold]"', "org", "attested",
        "2025-01-01T00:00:00.000Z", "-",
    ]  # fmt: skip
    assert all(line == line.rstrip() for line in lines)  # no padding in a pipe
    code, out, _ = _run(capsys, "facts", "--ledger", str(path), "--limit", "1")
    assert sum(1 for i in ids.values() if i in out) == 1
    assert "showing 1 of 3; --limit 0 shows all" in out
    code, out, _ = _run(capsys, "facts", "--ledger", str(path), "--subject", "nobody")
    assert code == 0 and out.startswith("0 facts believed valid at ") and len(out.splitlines()) == 1


def test_history_json_is_memory_history(
    seeded: tuple[Path, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, ids = seeded
    code, out, _ = _run(capsys, "history", ids["pro"], "--ledger", str(path), "--json")
    assert code == 0
    assert json.loads(out) == _tool(path, "memory.history", {"factId": ids["pro"]})
    events = json.loads(out)["events"]
    assert [(e["kind"], e.get("factId") or e["fact"]["factId"]) for e in events] == [
        ("assert", ids["pro"]),
        ("assert", ids["ent"]),
    ]
    code, out, _ = _run(capsys, "history", ids["ent"], "--ledger", str(path))
    assert code == 0
    rows = [line.split() for line in out.splitlines() if line.startswith("  20")]
    assert [r[1] for r in rows] == ["assert", "retract"]
    assert "wrong tier" in out and "rcpt-1" not in out


def test_show_json_is_memory_get(
    seeded: tuple[Path, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, ids = seeded
    for name in ("pro", "ent", "mail", "other"):
        code, out, _ = _run(capsys, "show", ids[name], "--ledger", str(path), "--json")
        assert code == 0
        assert json.loads(out) == _tool(path, "memory.get", {"factId": ids[name]})
    assert json.loads(out)["provenance"] == "attested"  # confirmed
    code, out, _ = _run(capsys, "show", ids["mail"], "--ledger", str(path))
    fields = {
        line.split(None, 1)[0]: line.split(None, 1)[1]
        for line in out.splitlines()[2:]
        if line.strip()
    }
    assert fields["now"] == "current, on legal hold"
    assert fields["value"] == '"a@example.com"' and fields["space"] == "team:support"
    code, out, _ = _run(capsys, "show", ids["ent"], "--ledger", str(path))
    assert "retracted" in out


def test_timeline_shows_both_time_axes(
    seeded: tuple[Path, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, ids = seeded
    code, out, _ = _run(capsys, "timeline", "user:42", "--ledger", str(path), "--json")
    assert code == 0
    data = json.loads(out)
    assert [f["factId"] for f in data["facts"]] == [ids["pro"], ids["ent"], ids["mail"]]
    assert data["states"] == {
        ids["pro"]: "current",
        ids["ent"]: "retracted",
        ids["mail"]: "current",
    }
    assert data["held"] == [ids["mail"]]
    assert [e["kind"] for e in data["events"]] == ["assert", "assert", "assert", "hold", "retract"]
    # As known before the retraction: enterprise superseded pro from June 2025.
    tx = data["events"][2]["txTime"]
    code, out, _ = _run(
        capsys, "timeline", "user:42", "--ledger", str(path), "--json", "--tx-at", tx
    )
    then = json.loads(out)
    assert then["states"] == {
        ids["pro"]: "superseded",
        ids["ent"]: "current",
        ids["mail"]: "current",
    }
    assert then["facts"][0]["validTo"] == "2025-06-01T00:00:00.000Z"
    assert [e["kind"] for e in then["events"]] == ["assert", "assert", "assert"]
    code, out, _ = _run(capsys, "timeline", "user:42", "--ledger", str(path))
    assert "what was believed about user:42 (valid time)" in out
    assert "when it was learned (transaction time)" in out
    assert "current, held" in out and "case 12" in out
    code, out, err = _run(capsys, "timeline", "user:nobody", "--ledger", str(path))
    assert code == 0 and out == "" and err.startswith("no facts about user:nobody")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["facts", "--valid-at", "2026-01-01"], "--valid-at: '2026-01-01' is not an RFC 3339 time"),
        (
            ["facts", "--tx-at", "2026-01-01T00:00:00"],
            "--tx-at: '2026-01-01T00:00:00' has no UTC offset",
        ),
        (
            ["timeline", "user:42", "--tx-at", "yesterday"],
            "--tx-at: 'yesterday' is not an RFC 3339",
        ),
        (["history", "no-such-fact"], "unknown fact no-such-fact in "),
        (["show", "no-such-fact"], "unknown fact no-such-fact in "),
    ],
)
def test_bad_input_is_one_line_and_changes_nothing(
    seeded: tuple[Path, dict[str, str]],
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    path, _ = seeded
    before = _files(path.parent)
    code, out, err = _run(capsys, *argv, "--ledger", str(path))
    assert code == (2 if message.startswith("--") else 1) and out == ""  # a time: usage error
    assert err.startswith(f"error: {message}") and len(err.splitlines()) == 1, err
    assert _files(path.parent) == before


@pytest.mark.parametrize(
    "argv",
    [["facts"], ["facts", "--json"], ["history", "x"], ["timeline", "s"], ["show", "x"]],
)
def test_a_missing_ledger_is_never_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, err = _run(capsys, *argv, "--ledger", str(tmp_path / "typo.jsonl"))
    assert code == 1 and out == ""
    assert "no such ledger; check the path (this command never creates a ledger)" in err
    assert list(tmp_path.iterdir()) == []
    code, _, err = _run(capsys, *argv, "--ledger", str(tmp_path / "missing" / "l.sqlite"))
    assert code == 1 and list(tmp_path.iterdir()) == []


def test_every_command_leaves_the_ledger_byte_identical(
    seeded: tuple[Path, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, ids = seeded
    before = _files(path.parent)
    for argv in (
        ["facts"],
        ["facts", "--json", "--include", "verified"],
        ["history", ids["ent"]],
        ["timeline", "user:42"],
        ["timeline", "user:42", "--json"],
        ["show", ids["mail"]],
        ["show", ids["mail"], "--json"],
    ):
        assert main([*argv, "--ledger", str(path)]) == 0
    capsys.readouterr()
    assert _files(path.parent) == before


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        ["facts"],
        ["facts", "--ledger", "x", "--include", "some"],
        ["show"],
        ["facts", "--ledger", "x", "--limit", "-1"],
    ):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
    assert "usage:" in capsys.readouterr().err


def test_a_narrow_screen_gets_records_with_whole_ids(
    seeded: tuple[Path, dict[str, str]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path, ids = seeded
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = _run(capsys, "facts", "--ledger", str(path))
    assert code == 0
    assert f"fact {ids['other']}" in out.splitlines()
    assert "  valid from  2025-01-01T00:00:00.000Z" in out.splitlines()
    assert all(len(line) <= 80 for line in out.splitlines()[1:])
    monkeypatch.setenv("COLUMNS", "250")
    code, out, _ = _run(capsys, "facts", "--ledger", str(path))
    assert f"fact {ids['other']}" not in out and ids["other"] in out  # a table row

"""SPEC sections 5 and 7 held to their letter: deviations found by an audit, one test each.

- SPEC 5: a flag value of the wrong form is a usage error (exit 2), as ``docs/cli.md`` says of
  "a port past 65535"; ``serve``'s numeric flags exited 1 through the configuration's check.
- SPEC 5: every error is one ``error: <message>`` line with exit 1; ``import`` of a line whose
  ids or ``external`` had the wrong JSON type ended in a traceback.
- SPEC 7: ``clock`` is a zero-argument callable returning an aware ``datetime``, and refusals
  raise ``LedgerError``; a clock returning a string failed with ``AttributeError`` mid-write.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.cli import main


def _exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's usage errors
        return int(exc.code or 0)


@pytest.mark.parametrize(
    "flag",
    [
        ["--port", "99999"],
        ["--port", "-1"],
        ["--max-request-bytes", "0"],
        ["--checkpoint-every", "0"],
        ["--max-concurrency", "-2"],
        ["--session-idle-timeout", "0"],
        ["--body-timeout", "nan"],
    ],
)
def test_serve_numeric_flag_of_the_wrong_form_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: list[str]
) -> None:
    ledger = tmp_path / "l.jsonl"
    code = _exit_code(["serve", "--ledger", str(ledger), "--http", *flag])
    assert code == 2
    err = capsys.readouterr().err
    assert f"argument {flag[0]}:" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # refused before anything was opened


def _line(event: dict[str, Any]) -> str:
    return json.dumps(event, separators=(",", ":"))


_ASSERT: dict[str, Any] = {
    "eventId": "11111111-1111-4111-8111-111111111111",
    "kind": "assert",
    "txTime": "2026-01-01T00:00:00.000Z",
    "fact": {
        "factId": "22222222-2222-4222-8222-222222222222",
        "subject": "acct:42",
        "predicate": "plan",
        "value": "pro",
        "space": "org",
        "actor": "a",
        "source": {"receiptId": None},
        "provenance": "claimed",
        "validFrom": "2026-01-01T00:00:00.000Z",
        "validTo": None,
        "confidence": None,
    },
    "supersedes": None,
}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"kind": "retract", "factId": ["x"]}, "retract event: factId must be a fact id (text)"),
        ({"kind": "hold", "factId": {"a": 1}}, "hold event: factId must be a fact id (text)"),
        ({"kind": "assert", "supersedes": ["x"]}, "assert event: supersedes must be a fact id"),
        ({"kind": ["retract"]}, "not an event:"),
        ({"fact": {**_ASSERT["fact"], "external": [1]}}, "not an event:"),
    ],
)
def test_import_of_a_mistyped_line_is_one_error_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    change: dict[str, Any],
    expected: str,
) -> None:
    second = {
        "eventId": "33333333-3333-4333-8333-333333333333",
        "kind": "retract",
        "txTime": "2026-01-01T00:00:01.000Z",
        "factId": _ASSERT["fact"]["factId"],
        "actor": "a",
        "reason": "r",
        "source": {"receiptId": None},
    }
    if change.get("kind") == "assert" or "fact" in change:  # a second assert, of another fact
        fact = {**_ASSERT["fact"], "factId": "44444444-4444-4444-8444-444444444444"}
        second = {**_ASSERT, "eventId": second["eventId"], "fact": fact}
    second.update(change)
    source = tmp_path / "export.jsonl"
    source.write_text(_line(_ASSERT) + "\n" + _line(second) + "\n", encoding="utf-8")
    ledger = tmp_path / "new.jsonl"
    assert main(["import", "--ledger", str(ledger), "--from", str(source)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {source}:2: ") and expected in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not ledger.exists()  # nothing imported, no ledger created


def test_a_clock_returning_something_else_than_a_datetime_is_a_ledger_error() -> None:
    ledger = Ledger("memory:", clock=lambda: "2026-01-01T00:00:00Z")  # type: ignore[arg-type,return-value]
    with pytest.raises(LedgerError, match="clock: must return an aware datetime, not a str") as exc:
        ledger.assert_fact(subject="a", predicate="p", value=1, space="org", actor="x")
    assert exc.value.field == "clock"
    assert ledger.count() == 0


def test_a_naive_clock_is_still_refused_naming_the_clock() -> None:
    ledger = Ledger("memory:", clock=lambda: datetime(2026, 1, 1))
    with pytest.raises(LedgerError, match="clock: a naive datetime has no offset"):
        ledger.as_of()


def test_a_clock_that_is_not_callable_is_refused_before_the_ledger_is_opened(
    tmp_path: Path,
) -> None:
    where = tmp_path / "l.sqlite"
    with pytest.raises(LedgerError, match="clock must be a zero-argument callable") as exc:
        Ledger(where, clock=datetime(2026, 1, 1, tzinfo=UTC))  # type: ignore[arg-type]
    assert exc.value.field == "clock"
    assert list(tmp_path.iterdir()) == []


def test_validate_assert_refuses_what_assert_fact_refuses_on_a_crypto_shred_ledger(
    tmp_path: Path,
) -> None:
    """SPEC 2.1: ``validate_assert`` runs the same checks. A ledger written in crypto-shred mode
    and opened in plain mode refuses new values; validate said yes, so a write-through flow put
    the value into the stores before the ledger refused it (and had to compensate)."""
    where = tmp_path / "l.jsonl"
    with Ledger(where, forget_mode="crypto-shred") as ledger:
        ledger.assert_fact(subject="a", predicate="p", value=1, space="org", actor="x")
    with Ledger(where) as ledger:
        args: dict[str, Any] = {
            "subject": "a", "predicate": "p", "value": 2, "space": "org", "actor": "x"
        }  # fmt: skip
        with pytest.raises(LedgerError) as refused:
            ledger.assert_fact(**args)
        with pytest.raises(LedgerError) as validated:
            ledger.validate_assert(**args)
        assert validated.value.code == refused.value.code == "crypto_shred"
        assert str(validated.value) == str(refused.value)

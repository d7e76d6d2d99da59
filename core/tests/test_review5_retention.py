"""Review 5: legal holds, retention and sweeps as the ledger decides them (SPEC 1.3, 2.6-2.8)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.cli import main

OLD = datetime(2020, 1, 1, tzinfo=UTC)


def _ledger(tmp_path: Path) -> tuple[Path, str]:
    """A JSONL ledger with an old fact on hold and an old fact free to go."""
    path = tmp_path / "ledger.jsonl"
    with Ledger(path, clock=lambda: OLD) as ledger:
        held = ledger.assert_fact(subject="s", predicate="p", value="a", space="o", actor="x")
        ledger.hold(fact_id=held.fact_id, actor="legal", reason="case")
        ledger.assert_fact(subject="s", predicate="q", value="b", space="o", actor="x")
    return path, held.fact_id


@pytest.mark.parametrize(
    "moment",
    [
        datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1))),  # year 0 in UTC
        datetime(9999, 12, 31, 23, 30, tzinfo=timezone(timedelta(hours=-1))),  # year 10000
    ],
)
def test_an_aware_datetime_outside_the_utc_years_is_refused_naming_the_parameter(
    tmp_path: Path, moment: datetime
) -> None:
    # The string spelling of these instants was refused; the datetime raised OverflowError.
    path, _ = _ledger(tmp_path)
    before = path.read_bytes()
    with Ledger(path) as ledger:
        with pytest.raises(LedgerError, match="^before: .*outside the years 0001-9999"):
            ledger.sweep(before=moment, actor="x", reason="r")
        with pytest.raises(LedgerError, match="^before: "):
            ledger.plan_sweep(moment)
        with pytest.raises(LedgerError, match="^tx_at: "):
            ledger.as_of(tx_at=moment)
    assert path.read_bytes() == before


def test_a_dry_run_refuses_an_empty_space_as_the_sweep_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The dry run answered "would forget 0 facts" where the sweep itself is refused.
    path, _ = _ledger(tmp_path)
    before = path.read_bytes()
    with Ledger(path) as ledger:
        with pytest.raises(LedgerError, match="^space must not be empty$"):
            ledger.plan_sweep("2030-01-01T00:00:00Z", "")
        with pytest.raises(LedgerError, match="^space must not be empty$"):
            ledger.sweep(before="2030-01-01T00:00:00Z", space="", actor="x", reason="r")
    capsys.readouterr()
    argv = ["sweep", "--ledger", str(path), "--before", "2030-01-01T00:00:00Z"]
    for dry in (["--dry-run"], []):
        assert main([*argv, "--space", "", "--reason", "r", *dry]) == 1
        assert capsys.readouterr().err == "error: space must not be empty\n"
    assert path.read_bytes() == before


def test_a_hold_placed_released_and_placed_again_on_a_superseded_link_keeps_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.jsonl"
    with Ledger(path, clock=lambda: OLD) as ledger:
        a = ledger.assert_fact(subject="s", predicate="p", value="a", space="o", actor="x")
        b = ledger.assert_fact(
            subject="s", predicate="p", value="b", space="o", actor="x", supersedes=a.fact_id
        )
        for action in (ledger.hold, ledger.release, ledger.hold):
            action(fact_id=a.fact_id, actor="legal", reason="case")
        ledger.retract(fact_id=b.fact_id, actor="x", reason="wrong")
    with Ledger(path) as ledger:
        plan = ledger.plan_sweep("2020-01-01T01:00:00+01:00")  # the instant the facts were learned
        assert plan.forget == [] and plan.held == []
        cutoff = "2020-01-01T01:00:00.001+01:00"
        plan = ledger.plan_sweep(cutoff)
        result = ledger.sweep(before=cutoff, actor="x", reason="retention")
        assert [e.fact_id for e in plan.forget] == [e.fact_id for e in result.forgotten]
        assert [e.fact_id for e in result.forgotten] == [b.fact_id]
        assert result.held == plan.held == [a.fact_id]
        kept = ledger.get(a.fact_id)
        assert kept is not None and kept.value == "a" and kept.forgotten is None
        with pytest.raises(LedgerError, match=f"^fact {a.fact_id} is on legal hold; release"):
            ledger.forget(fact_id=a.fact_id, actor="x", reason="r")


def test_a_custody_sweep_reports_its_cutoff_as_the_ledger_writes_times(tmp_path: Path) -> None:
    """``Custody.sweep`` and ``plan_sweep`` echoed a ``before`` given as text as typed (an
    offset, no milliseconds) while ``memory.sweep`` and ``sweep --json`` report the wire form."""
    import anyio

    from agent_custody_state.stores import StoreSet
    from agent_custody_state.stores.flows import Custody

    async def run() -> tuple[str | None, str | None]:
        with Ledger(tmp_path / "ledger.jsonl") as ledger:
            custody = Custody(ledger, StoreSet([]))
            given = "2030-01-01T02:00:00+02:00"
            preview = await custody.plan_sweep(before=given)
            report = await custody.sweep(actor="ops", reason="retention", before=given)
            return preview.before, report.before

    assert anyio.run(run) == ("2030-01-01T00:00:00.000Z", "2030-01-01T00:00:00.000Z")


def test_learned_before_refuses_an_empty_space_as_the_sweep_does(tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        with pytest.raises(LedgerError, match="space"):
            ledger.learned_before("2030-01-01T00:00:00Z", space="")

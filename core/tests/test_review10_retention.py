"""Review 10: retention, sweeps and holds at the edges of time (SPEC 2.6-2.8), on JSONL and
``memory:``."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state import AssertRequest, Ledger, LedgerError, RetentionPolicy
from agent_custody_state.ledger.retention import parse_duration
from agent_custody_state.server.progress import Progress
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SPACES = (("team:a", 3), ("team:b", 0), ("team:c", 2), ("user:x", 4))


def _spread(ledger: Ledger, clock: list[datetime]) -> None:
    """Facts in several spaces at ``T0``; ``team:b`` has one learned recently (kept)."""
    for space, count in SPACES:
        for i in range(count):
            ledger.assert_fact(subject=f"s{i}", predicate="p", value=i, space=space, actor="a")
    clock[0] = T0 + timedelta(days=400)
    ledger.assert_fact(subject="new", predicate="p", value=0, space="team:b", actor="a")


def test_a_retention_sweep_reports_one_growing_count_over_every_space(tmp_path: Path) -> None:
    """Each retention window is a pass of its own: the ledger's count restarted at 0 at every
    space, its total changing, instead of one count over the whole sweep ending at its total."""
    clock = [T0]
    with Ledger(tmp_path / "l.jsonl", clock=lambda: clock[0]) as ledger:
        _spread(ledger, clock)
        custody = Custody(ledger, retention=RetentionPolicy.parse("team:*=P30D,user:*=P1D"))
        seen: list[tuple[str, int, int]] = []
        report = anyio.run(
            lambda: custody.sweep(actor="a", reason="r", progress=lambda *a: seen.append(a))
        )
    assert len(report.forgotten) == 9
    done = [d for _, d, _ in seen]
    assert done == sorted(done), seen
    assert {t for _, _, t in seen} == {9}, seen
    assert seen[0] == ("ledger", 0, 9) and seen[-1] == ("ledger", 9, 9)


def test_the_store_part_counts_on_from_the_whole_ledger_part() -> None:
    """``memory.sweep``'s notifications: the stores' removals count on from every forget of
    every space (they counted on from the last space's total, below numbers already sent)."""
    clock = [T0]
    ledger = Ledger("memory:", clock=lambda: clock[0])
    custody = Custody(
        ledger,
        [InProcessStore("vectors")],
        retention=RetentionPolicy.parse("team:*=P30D,user:*=P1D"),
    )
    sent: list[float] = []

    async def main() -> None:
        for space, count in SPACES:
            for i in range(count):
                request = AssertRequest(
                    subject=f"s{i}", predicate="p", value=i, space=space, actor="a"
                )
                await custody.write(request)
        clock[0] = T0 + timedelta(days=400)

        async def report(value: float, total: float | None, message: str | None) -> None:
            sent.append(value)

        progress = Progress(report, asyncio.get_running_loop())
        async with anyio.create_task_group() as group:
            group.start_soon(progress.run)
            result = await custody.sweep(actor="a", reason="r", progress=progress)
            progress.finish()
        assert len(result.forgotten) == 9
        assert all(s.removal.removed_from == ["vectors"] for s in result.forgotten)

    anyio.run(main, backend="asyncio")
    assert sent == sorted(sent) and sent[-1] == 9 + 9, sent


@pytest.mark.parametrize(
    "text",
    ["P" + "9" * 5000 + "D", "P" + "9" * 5000 + "Y", "PT" + "9" * 5000 + ".5S"],
)
def test_a_duration_longer_than_python_reads_is_refused_as_too_long(text: str) -> None:
    """Past 4300 digits ``int`` raised a ValueError (not the parser's error, so a config file
    said "Exceeds the limit (4300 digits) for integer string conversion"); the message names
    the duration shortened."""
    with pytest.raises(LedgerError, match=r"reaches before year 1") as caught:
        RetentionPolicy.parse({"org": text})
    assert caught.value.field == "retention" and len(str(caught.value)) < 100


def test_leading_zeros_do_not_count_as_length() -> None:
    duration = parse_duration("P" + "0" * 5000 + "1D")
    assert duration.delta == timedelta(days=1)


def test_a_fact_appended_after_the_listing_is_not_forgotten_behind_the_stores(
    tmp_path: Path,
) -> None:
    """``memory.sweep`` with a ``before`` not yet past while another writer appends: a fact
    appended after the flow listed what leaves the stores (and owed its removals) but before
    the ledger read its candidates was forgotten in the ledger and left in the store, erased
    value and all, with no problem reported. It now waits for the next sweep, in both."""
    path = tmp_path / "l.jsonl"
    store = InProcessStore("vectors")
    writer = Custody(Ledger(path), [store])  # another process, as far as this flow knows
    ledger = Ledger(path)
    custody = Custody(ledger, [store], outbox=tmp_path / "l.outbox")

    def write(value: str) -> None:
        request = AssertRequest(subject="s", predicate=value, value=value, space="org", actor="a")
        anyio.run(lambda: writer.write(request))

    write("old")
    listing = ledger.learned_before
    calls: list[str] = []

    def listed_then_written(before: Any, space: str | None = None) -> Any:
        found = listing(before, space)
        if not calls:  # the flow's listing: the other writer appends right after it
            calls.append("listed")
            thread = threading.Thread(target=write, args=("meanwhile",))
            thread.start()
            thread.join()
        return found

    ledger.learned_before = listed_then_written  # type: ignore[method-assign]
    future = datetime.now(UTC) + timedelta(days=1)
    report = anyio.run(lambda: custody.sweep(actor="dpo", reason="r", before=future))
    assert calls and report.problems() == []
    assert [s.removal.removed_from for s in report.forgotten] == [["vectors"]]
    values = {fact.value for fact in ledger.facts()}
    rows = {row["value"] for row in store.vendor.rows.values()}
    assert values == {None, "meanwhile"} and rows == {"meanwhile"}
    ledger.close()
    writer.ledger.close()


def test_a_sweep_at_the_dry_runs_instant_forgets_what_it_listed() -> None:
    """Retention windows are measured from now, so the sweep after a dry run forgot the facts
    that crossed a window in between, unlisted. ``at`` pins the dry run's instant."""
    clock = [T0]
    ledger = Ledger("memory:", clock=lambda: clock[0])
    first = ledger.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")
    clock[0] = T0 + timedelta(hours=1)
    ledger.assert_fact(subject="s", predicate="q", value=2, space="org", actor="a")
    custody = Custody(ledger, retention=RetentionPolicy.parse("org=P30D"))
    clock[0] = T0 + timedelta(days=30, minutes=30)  # past the first fact's window only
    at = custody.measured_at()
    preview = anyio.run(lambda: custody.plan_sweep(at=at))
    assert [e.fact_id for e in preview.forget] == [first.fact_id]
    clock[0] += timedelta(hours=1)  # the second fact crosses its window meanwhile
    report = anyio.run(lambda: custody.sweep(actor="a", reason="r", at=at))
    assert [s.event.fact_id for s in report.forgotten] == [first.fact_id]
    with pytest.raises(LedgerError, match="after now") as caught:  # never more than now
        anyio.run(lambda: custody.sweep(actor="a", reason="r", at=T0 + timedelta(days=99)))
    assert caught.value.field == "at"
    with pytest.raises(LedgerError, match="not a `before`"):
        anyio.run(lambda: custody.plan_sweep(before=T0, at=at))

"""``import_events`` checks the whole export before it appends anything (``importcheck``):
ids once each, times that parse, references to facts asserted before, forgotten facts without
values and with their forget event. A refused import leaves the ledger empty (SQLite: the
plugin's ``test_sqlite_refusals.py``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.ledger.model import AssertEvent, Event, ForgetEvent, RetractEvent


def _export(tmp_path: Path) -> list[Event]:
    with Ledger(tmp_path / "src.jsonl") as ledger:
        ids = [
            ledger.assert_fact(subject=f"s{i}", predicate="p", value=i, space="org", actor="a")
            for i in range(3)
        ]
        ledger.retract(fact_id=ids[0].fact_id, actor="a", reason="r")
        ledger.forget(fact_id=ids[1].fact_id, actor="a", reason="r")
        return list(ledger.backend.iter_events())


def _fact(event: Event, **changes: Any) -> AssertEvent:
    assert isinstance(event, AssertEvent)
    return dataclasses.replace(event, fact=dataclasses.replace(event.fact, **changes))


Edit = Callable[[list[Event]], list[Event]]
CASES: list[tuple[str, Edit, str]] = [
    ("event id twice", lambda e: [*e, e[2]], "event 6: eventId {e2} is also event 3's"),
    (
        "fact id twice",
        lambda e: [*e, dataclasses.replace(e[2], event_id="x-1")],
        "event 6: fact {f2} is also asserted by event 3",
    ),
    (
        "retract of nothing",
        lambda e: [*e, RetractEvent("x-2", e[3].tx_time, "nope", "a", "r")],
        "event 6: a retract of fact nope, which no earlier event asserts",
    ),
    (
        "time",
        lambda e: [e[0], dataclasses.replace(e[1], tx_time="yesterday"), *e[2:]],
        "event 2: txTime: 'yesterday' is not an RFC 3339 time such as 2026-09-01T00:00:00Z",
    ),
    (
        "valid from",
        lambda e: [_fact(e[0], valid_from="2026-03-01T00:00:03"), *e[1:]],
        "event 1: validFrom: '2026-03-01T00:00:03' has no UTC offset; add Z or +hh:mm",
    ),
    (
        "supersedes nothing",
        lambda e: [
            *e,
            dataclasses.replace(_fact(e[2], fact_id="x-3"), event_id="x-4", supersedes="nope"),
        ],
        "event 6: supersedes of fact nope, which no earlier event asserts",
    ),
    (
        "forgotten with a value",
        lambda e: [e[0], _fact(e[1], value="leak"), *e[2:]],
        "event 2: fact {f1} is marked forgotten but holds a value",
    ),
    (
        "forgotten without a forget",
        lambda e: e[:4],
        "event 2: fact {f1} is marked forgotten, but no forget event records it",
    ),
    (
        "forget of a fact still holding its value",
        lambda e: [
            *e,
            ForgetEvent("x-5", e[4].tx_time, e[2].fact_id, "a", "r", digest_kind="none"),
        ],
        "event 6: fact {f2} is forgotten here, but its assert (event 3) still holds its value",
    ),
    (
        "surrogate",
        lambda e: [_fact(e[0], subject="x\ud800"), *e[1:]],
        "event 1: subject has a lone surrogate ('\\ud800'): pass valid Unicode",
    ),
]


@pytest.mark.parametrize(("case", "edit", "message"), CASES, ids=[c[0] for c in CASES])
def test_a_bad_export_is_refused_before_anything_is_written(
    tmp_path: Path, case: str, edit: Edit, message: str
) -> None:
    events = _export(tmp_path)
    names = {"e2": events[2].event_id, "f1": events[1].fact_id, "f2": events[2].fact_id}  # type: ignore[attr-defined]
    with Ledger(tmp_path / "to.jsonl") as ledger:
        with pytest.raises(LedgerError) as caught:
            ledger.import_events(edit(events))
        assert str(caught.value) == message.format(**names)
        assert caught.value.code == "bad_export" and ledger.count() == 0


def test_an_intact_export_imports_whole(tmp_path: Path) -> None:
    events = _export(tmp_path)
    with Ledger(tmp_path / "to.jsonl") as ledger:
        assert ledger.import_events(events) == len(events) == ledger.count()


def test_the_command_refuses_a_bad_export_before_creating_the_ledger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agent_custody_state.cli import main

    events = _export(tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(e.to_json() + "\n" for e in [*events, events[2]]), "utf-8")
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["import", "--ledger", str(tmp_path / "to.jsonl"), "--from", str(bad)]) == 1
    assert capsys.readouterr().err == (
        f"error: {bad}: event 6: eventId {events[2].event_id} is also event 3's; nothing imported\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # not even a lock file


def _unchained_export(tmp_path: Path) -> list[Event]:
    """Every kind of event, written without the chain (the shape of the original's exports)."""
    with Ledger(tmp_path / "plain.jsonl", chain=False) as ledger:
        a = ledger.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")
        b = ledger.assert_fact(
            subject="s", predicate="p", value={"k": [1, "é"]}, space="org", actor="a",
            supersedes=a.fact_id,
        )  # fmt: skip
        ledger.confirm(fact_id=b.fact_id, actor="a")
        ledger.hold(fact_id=a.fact_id, actor="a", reason="r")
        ledger.release(fact_id=a.fact_id, actor="a", reason="r")
        ledger.retract(fact_id=b.fact_id, actor="a", reason="r")
        ledger.forget(fact_id=a.fact_id, actor="a", reason="r")
        return list(ledger.backend.iter_events())


def test_an_unchained_export_is_one_verify_finds_nothing_in(tmp_path: Path) -> None:
    """The reason ``check_export`` skips the chain check when no event carries the chain: the
    full check over such an export, however edited (times, values, order), refuses nothing."""
    from agent_custody_state.ledger.importcheck import _chained, _check_chain

    events = _unchained_export(tmp_path)
    assert not any(map(_chained, events))
    edited = [*reversed(events[2:]), _fact(events[0], value=2), events[1]]
    for export in (events, edited, events[:3]):
        _check_chain(export)  # raises at the first problem verify would report


def test_one_chained_event_brings_the_chain_check_back(tmp_path: Path) -> None:
    events = _unchained_export(tmp_path)
    with Ledger(tmp_path / "plain.jsonl") as ledger:  # the chain starts here, with a genesis
        ledger.assert_fact(subject="s", predicate="q", value=3, space="org", actor="a")
        chained = list(ledger.backend.iter_events())
    assert len(chained) == len(events) + 1
    edited = [chained[0], _fact(chained[1], actor="m"), *chained[2:]]  # the genesis covers it
    with Ledger(tmp_path / "to.jsonl") as target:
        with pytest.raises(LedgerError, match="do not hash to its record"):
            target.import_events(edited)
        assert target.count() == 0
        assert target.import_events(chained) == len(chained)

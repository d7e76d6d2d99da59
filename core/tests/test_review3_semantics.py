"""Third review of the ledger's semantics: lines written by others keep every key (SPEC 1.2);
retention windows of the wrong type are refused naming them (SPEC 2.8); nothing a caller
mutates reaches what the ledger holds (SPEC 7: immutable models).

A newer TypeScript writer may add keys inside the nested ``source`` and ``forgotten`` objects,
not only at the top of an event or a fact. Every key must survive an export, an import, a
forget's in-place rewrite, and the hash chain a Python writer starts on such a ledger must
verify (its genesis hashes the lines as stored).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from agent_custody_state import Ledger, LedgerError, RetentionPolicy, create_memory_server
from agent_custody_state.canonical import value_digest
from agent_custody_state.ledger.model import event_from_json
from agent_custody_state.ledger.verify import verify_lines
from agent_custody_state_conformance.clock import StepClock

SOURCE = {"receiptId": "r-1", "gateway": {"name": "gw", "v": 2}}
FORGOTTEN = {"valueDigest": None, "digestKind": "none", "at": "2026-01-03T00:00:00.000Z"}


def _fact(fact_id: str, value: Any, **more: Any) -> dict[str, Any]:
    return {
        "factId": fact_id,
        "subject": "acct:1",
        "predicate": "plan",
        "value": value,
        "space": "org",
        "actor": "ts-agent",
        "source": SOURCE,
        "provenance": "claimed",
        "validFrom": "2026-01-01T00:00:00.000Z",
        "validTo": None,
        "confidence": None,
        **more,
    }


def _lines() -> list[str]:
    """A ledger as a newer TypeScript writer left it: extra keys inside ``source`` (fact and
    event) and inside ``forgotten``."""
    events: list[dict[str, Any]] = [
        {
            "eventId": "e-1",
            "kind": "assert",
            "txTime": "2026-01-01T00:00:00.000Z",
            "fact": _fact("f-1", {"seats": 3}),
            "supersedes": None,
        },
        {
            "eventId": "e-2",
            "kind": "assert",
            "txTime": "2026-01-02T00:00:00.000Z",
            "fact": _fact("f-2", None, forgotten={**FORGOTTEN, "certificate": "c-9"}),
            "supersedes": None,
        },
        {
            "eventId": "e-3",
            "kind": "forget",
            "txTime": "2026-01-03T00:00:00.000Z",
            "factId": "f-2",
            "actor": "dpo",
            "reason": "erasure",
            "source": {"receiptId": None, "ticket": "T-7"},
            "valueDigest": None,
            "digestKind": "none",
        },
        {
            "eventId": "e-4",
            "kind": "hold",
            "txTime": "2026-01-04T00:00:00.000Z",
            "factId": "f-1",
            "actor": "legal",
            "reason": "case",
            "source": {"receiptId": "r-2", "ticket": "T-8"},
        },
    ]
    return [json.dumps(e, separators=(",", ":")) for e in events]


def _write(path: Path, lines: list[str]) -> None:
    path.write_text("".join(f"{line}\n" for line in lines))


def test_nested_unknown_keys_survive_reading_and_export(tmp_path: Path) -> None:
    path = tmp_path / "ts.jsonl"
    _write(path, _lines())
    with Ledger(path, read_only=True) as ledger:
        exported = [event.to_json() for event in ledger.export()]
        fact = ledger.get("f-1")
    assert exported == _lines()
    assert fact is not None and fact.to_dict()["source"] == SOURCE
    # The memory backend, and an import, keep them too.
    with Ledger("memory:", chain=False) as memory:
        memory.import_events([event_from_json(line) for line in _lines()], check_chain=False)
        assert [event.to_json() for event in memory.export()] == _lines()


def test_a_forget_rewrites_only_the_value_and_keeps_the_sources_keys(tmp_path: Path) -> None:
    path = tmp_path / "ts.jsonl"
    _write(path, _lines())
    with Ledger(path) as ledger:
        ledger.release(fact_id="f-1", actor="legal", reason="closed")
        event = ledger.forget(fact_id="f-1", actor="dpo", reason="erasure")
    first = json.loads(path.read_text().splitlines()[0])
    assert first["fact"]["source"] == SOURCE
    assert first["fact"]["value"] is None
    assert first["fact"]["forgotten"]["at"] == event.tx_time
    rest = [k for k in first["fact"] if k != "forgotten"]
    assert rest == list(_fact("f-1", None))  # nothing else changed, nothing dropped
    assert path.read_text().splitlines()[1:4] == _lines()[1:]


def test_a_python_writer_continuing_such_a_ledger_keeps_it_verifiable(tmp_path: Path) -> None:
    """The chain's genesis hashes the stored lines, as ``verify`` reads them: dropping a key
    while hashing made every such ledger fail verify as if edited."""
    path = tmp_path / "ts.jsonl"
    _write(path, _lines())
    with Ledger(path) as ledger:
        ledger.assert_fact(subject="acct:2", predicate="plan", value="pro", space="org", actor="a")
    report = verify_lines(path.read_bytes().splitlines())
    assert report.ok, report.problems
    assert report.genesis == 5


@pytest.mark.parametrize(
    ("spec", "text"),
    [
        ({"org": 365}, "retention window 'org': the pattern and its duration must be text"),
        ({"org": None}, "retention window 'org': the pattern and its duration must be text"),
        (["org=P1D"], "retention must be a spec such as 'org=P365D,team:*=P90D' or a mapping"),
    ],
)
def test_retention_of_the_wrong_type_is_refused_naming_it(spec: Any, text: str) -> None:
    """SPEC 2.8: every window is checked at start with a clear error naming it (a mapping
    given to ``create_memory_server`` failed with an AttributeError instead)."""
    with pytest.raises(LedgerError) as refused:
        RetentionPolicy.parse(spec)
    assert str(refused.value).startswith(text) and refused.value.field == "retention"
    with Ledger("memory:") as ledger, pytest.raises(LedgerError):
        create_memory_server(ledger, retention=spec, require_gateway=False)


def test_retention_windows_pick_the_most_specific_pattern_with_calendar_months() -> None:
    policy = RetentionPolicy.parse(
        MappingProxyType({"*": "P1M", "team:*": "P1Y", "team:support": "PT12H", "team:sup*": "P2W"})
    )
    assert policy is not None
    now = datetime(2024, 3, 31, 12, tzinfo=UTC)
    assert policy.cutoff_for("user:dana", now) == datetime(2024, 2, 29, 12, tzinfo=UTC)
    assert policy.cutoff_for("team:sales", now) == datetime(2023, 3, 31, 12, tzinfo=UTC)
    assert policy.cutoff_for("team:supply", now) == datetime(2024, 3, 17, 12, tzinfo=UTC)
    assert policy.cutoff_for("team:support", now) == datetime(2024, 3, 31, 0, tzinfo=UTC)


def _open(kind: str, tmp_path: Path) -> Ledger:
    """A ledger whose clock moves 1 ms per reading, so each write has its own instant."""
    if kind == "memory":
        return Ledger("memory:", clock=StepClock())
    return Ledger(tmp_path / "ledger.jsonl", clock=StepClock())


@pytest.mark.parametrize("kind", ["memory", "jsonl"])
def test_what_a_caller_mutates_never_changes_what_the_ledger_holds(
    kind: str, tmp_path: Path
) -> None:
    """SPEC 7: facts and events are immutable. The memory and JSONL backends keep objects,
    and the ledger handed them out: mutating the dict given to ``assert_fact``, or a value read
    back ("update a field, then supersede"), rewrote the past in memory (the file kept the
    original, so a reopened ledger answered differently) and the forget digest was of the
    mutated value, so the certificate named a value the ledger never stored."""
    value: dict[str, Any] = {"seats": [1, 2], "plan": "pro"}
    base: dict[str, Any] = dict(subject="acct:1", predicate="plan", space="org", actor="a")
    with _open(kind, tmp_path) as ledger:
        first = ledger.assert_fact(**base, value=value, external={"mem0": "m-1"})
        value["plan"] = "changed by the caller"  # the caller's own dict, after the call
        first.fact.value["seats"].append(3)  # the event returned
        read = ledger.get(first.fact_id)
        assert read is not None and read.external is not None
        read.value["plan"] = "enterprise"  # "update a field, then supersede"
        read.external["mem0"] = "edited"
        ledger.assert_fact(**base, value=read.value, supersedes=first.fact_id)
        ledger.as_of(valid_at=first.fact.valid_from)[0].value["seats"].clear()
        ledger.history(first.fact_id)[0].fact.value["plan"] = "history edited"  # type: ignore[union-attr]
        ledger.facts()[0].value["seats"].append(9)
        [batch] = ledger.assert_many([{**base, "space": "team", "value": {"x": [1]}}])
        batch.fact.value["x"].append(2)
        assert ledger.get(batch.fact_id).value == {"x": [1]}  # type: ignore[union-attr]
        # Nothing above reached the ledger: the past reads as written.
        past = ledger.as_of(tx_at=first.tx_time)
        assert [f.value for f in past] == [{"seats": [1, 2], "plan": "pro"}]
        assert ledger.get(first.fact_id).external == {"mem0": "m-1"}  # type: ignore[union-attr]
        forget = ledger.forget(fact_id=first.fact_id, actor="dpo", reason="erasure")
        assert (
            forget.value_digest
            == value_digest({"seats": [1, 2], "plan": "pro"}, forget_key=None)[0]
        )
        answers = [e.to_dict() for e in ledger.export()]
    if kind == "jsonl":
        with Ledger(tmp_path / "ledger.jsonl") as reopened:
            assert [e.to_dict() for e in reopened.export()] == answers
            report = verify_lines((tmp_path / "ledger.jsonl").read_bytes().splitlines())
            assert report.ok, report.problems
            assert reopened.get(first.fact_id).external == {"mem0": "m-1"}  # type: ignore[union-attr]


@pytest.mark.parametrize("receipt", [123, float("nan"), {"id": "r"}, object()])
def test_a_receipt_id_that_is_not_text_is_refused_by_every_mutation(
    receipt: Any, tmp_path: Path
) -> None:
    """SPEC 1.1: ``source.receiptId`` is text or null. ``assert_fact`` refused anything else;
    the other mutations wrote it (a number, an object; NaN as ``null`` in the file while the
    event in memory kept NaN, so a reopened ledger read another event) or failed inside the
    encoder with a ``TypeError``. Refused, the file is unchanged."""
    path = tmp_path / "ledger.jsonl"
    with Ledger(path, clock=StepClock()) as ledger:
        fact = ledger.assert_fact(subject="s", predicate="p", value=1, space="o", actor="a")
        ledger.hold(fact_id=fact.fact_id, actor="legal", reason="case")
        before = path.read_bytes()
        by = {"fact_id": fact.fact_id, "actor": "x", "receipt_id": receipt}
        calls: list[Callable[[], object]] = [
            lambda: ledger.retract(**by, reason="r"),
            lambda: ledger.confirm(**by),
            lambda: ledger.hold(**by, reason="r"),
            lambda: ledger.release(**by, reason="r"),
            lambda: ledger.forget(**by, reason="r"),
            lambda: ledger.sweep(
                before="2100-01-01T00:00:00Z", actor="x", reason="r", receipt_id=receipt
            ),
            lambda: ledger.sweep(
                before="2000-01-01T00:00:00Z", actor="x", reason="r", receipt_id=receipt
            ),
        ]
        for call in calls:
            with pytest.raises(LedgerError) as refused:
                call()
            assert refused.value.field == "receipt_id", refused.value
        assert path.read_bytes() == before

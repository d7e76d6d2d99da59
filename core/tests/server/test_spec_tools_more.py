"""SPEC 4.2, table-driven (continued): evidence, sweep, and memory.get's policy shape, served in
process as the gateway calls them (``test_spec_tools.Harness``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_spec_tools import AGENT, OBSERVED, RECEIPT, Harness, h

from agent_custody_state import Ledger
from agent_custody_state.server.service import MemoryService

__all__ = ["h"]  # the fixture, shared


EVIDENCE: list[tuple[dict[str, Any], Any, Any, str | None]] = [
    ({"fact": "crm", "path": "plan"}, {"plan": "pro"}, "pro", None),
    ({"fact": "crm", "path": "seats.1"}, {"seats": [1, 2]}, 2, None),
    ({"fact": "crm"}, {"b": 1, "a": [1]}, {"a": [1], "b": 1}, None),
    (
        {"fact": "crm", "path": "plan"},
        {"plan": 1},
        "1",
        'value differs from what the gateway observed in "crm.plan"; write refused',
    ),
    (
        {"fact": "crm"},
        True,
        1,
        'value differs from what the gateway observed in "crm"; write refused',
    ),
    (
        {"fact": "crm", "path": "nope"},
        {"plan": 1},
        1,
        'value differs from what the gateway observed in "crm.nope"; write refused',
    ),
    # JavaScript's v[k]: "01" is no array index (the original reads undefined there)
    (
        {"fact": "crm", "path": "seats.01"},
        {"seats": [1, 2]},
        2,
        'value differs from what the gateway observed in "crm.seats.01"; write refused',
    ),
    ({"fact": "crm", "path": "seats.0"}, {"seats": [1, 2]}, 1, None),
    (
        {"fact": "erp"},
        {"plan": 1},
        1,
        'no fact named "erp" was fetched by the gateway for this call; configure a fact lookup '
        "for memory.write",
    ),
]


@pytest.mark.parametrize(("evidence", "observed", "value", "error"), EVIDENCE)
def test_evidence(
    h: Harness, evidence: dict[str, Any], observed: Any, value: Any, error: str | None
) -> None:
    args = {"subject": "e", "predicate": "p", "value": value, "space": "org", "evidence": evidence}
    result = h.gw("memory.write", args, **{OBSERVED: {"crm": observed}})
    if error is None:
        assert not result.is_error, result.texts
        assert json.loads(result.texts[0])["fact"]["provenance"] == "verified"
    else:
        assert result.is_error and result.texts == [error]


def test_evidence_needs_attested(h: Harness) -> None:
    args = {
        "subject": "e",
        "predicate": "p",
        "value": 1,
        "space": "org",
        "evidence": {"fact": "crm"},
    }
    text = "evidence needs the gateway: only a fact the gateway fetched itself can verify a value"
    for meta in ({AGENT: None}, {RECEIPT: None, AGENT: None}):
        result = h.gw("memory.write", args, **meta, **{OBSERVED: {"crm": 1}})
        assert result.is_error and result.texts == [text]
    direct = h.call(
        "memory.write", args, {RECEIPT: "r", AGENT: "a", OBSERVED: {"crm": 1}}, role="direct"
    )
    assert direct.is_error and direct.texts == [text]


def test_sweep_without_before_or_windows(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "bare.jsonl")
    service = MemoryService.build(ledger, require_gateway=False)
    try:
        result = Harness(service).gw("memory.sweep", {"reason": "r", "space": "org"})
    finally:
        service.close()
        ledger.close()
    assert result.is_error
    assert result.texts == ["sweep needs `before`, or a server started with retention windows"]


def test_sweep_store_failure_text(tmp_path: Path) -> None:
    from test_stores import FakeStore

    ledger = Ledger(tmp_path / "stores.jsonl")
    service = MemoryService.build(
        ledger,
        require_gateway=False,
        stores=[FakeStore("bad", fail_remove=True)],
        verify={"attempts": 1, "delay_ms": 0},
    )
    try:
        h = Harness(service)
        fid = h.fact(subject="acct:st")
        result = h.gw("memory.sweep", {"reason": "r", "before": "2999-01-01T00:00:00Z"})
    finally:
        service.close()
        ledger.close()
    assert result.is_error and len(result.texts) == 2
    assert result.texts[0] == (
        f"swept the ledger, but some values are still held by stores: bad ({fid}): "
        "service unavailable"
    )
    assert json.loads(result.texts[1])["stillHeld"] == [fid]


def test_get_after_confirm_forget_and_retract(h: Harness) -> None:
    claimed = str(
        h.ok(
            "memory.write",
            {"subject": "g", "predicate": "p", "value": 1, "space": "org"},
            **{AGENT: None},
        )["fact"]["factId"]
    )
    assert h.ok("memory.get", {"factId": claimed})["provenance"] == "claimed"
    h.ok("memory.confirm", {"factId": claimed})
    got = h.ok("memory.get", {"factId": claimed})
    assert got["provenance"] == "attested" and got["retracted"] is False
    assert isinstance(got["source"], str)
    h.ok("memory.forget", {"factId": claimed, "reason": "gdpr", "keepDigest": False})
    got = h.ok("memory.get", {"factId": claimed})
    assert got["retracted"] is True and "value" not in got
    assert got["forgotten"] == {"digestKind": "none", "at": got["forgotten"]["at"]}
    other = h.fact(subject="g2")
    h.ok("memory.retract", {"factId": other, "reason": "wrong"})
    assert h.ok("memory.get", {"factId": other})["retracted"] is True


def test_sweep_retention_and_forgotten(h: Harness) -> None:
    fid = h.fact(subject="sw", space="sweep:a")
    held = h.fact(subject="sw2", space="sweep:a")
    h.ok("memory.hold", {"factId": held, "reason": "legal"})
    data = h.ok("memory.sweep", {"reason": "retention", "space": "sweep:a"})
    assert data["before"] is None and data["retention"] == {"sweep:*": "PT0S"}
    assert data["space"] == "sweep:a"
    assert [f["factId"] for f in data["forgotten"]] == [fid]
    assert list(data["forgotten"][0]) == [
        "factId",
        "valueDigest",
        "digestKind",
        "removedFrom",
        "verification",
    ]
    assert data["held"] == [held] and data["stillHeld"] == []
    again = h.ok("memory.sweep", {"reason": "r", "before": "2000-01-01T02:00:00+02:00"})
    assert again["before"] == "2000-01-01T00:00:00.000Z" and again["retention"] is None

"""``resume``'s words for an entry no crash left, and a recovered certificate's for a store not
configured where it is issued (twenty-second review).

Since a retract, forget or sweep leaves the outbox entry of a store not configured in its
process owed on purpose (``Owing._settle``), ``resume`` finds entries no crash left: its log
("finished the removal ... interrupted by a crash") and its summary ("the store removals of N
facts left by a crash") said otherwise. They now say "owed", and the log names both causes.

A certificate recovered at the next start from an erasure intent named every store
``unknown`` with "the outbox, when kept, finishes the removal at the next start", also a store
not configured in the process that issued it, whose entry that start's outbox leaves. That
store is now ``notConfigured`` and its text says who finishes the removal
(``owed.LEFT_ELSEWHERE``, the words a stopped sweep uses: ``sweep_interrupt.ELSEWHERE``).
"""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.stores import archive
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore
from agent_custody_state.stores.intents import NOT_HERE, STORES_UNKNOWN
from agent_custody_state.stores.outbox import Outbox
from agent_custody_state.stores.owed import LEFT_ELSEWHERE
from agent_custody_state.stores.sweep_interrupt import ELSEWHERE


def _written(ledger: Ledger, a: InProcessStore, gone: InProcessStore) -> str:
    request = AssertRequest(subject="s", predicate="p", value="v", space="o", actor="x")
    return anyio.run(Custody(ledger, [a, gone]).write, request).event.fact_id


def _outbox_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.endswith(".outbox")]


@pytest.mark.parametrize("flow", ["retract", "forget"])
def test_resume_does_not_call_an_unconfigured_stores_entry_a_crashs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, flow: str
) -> None:
    a, gone = InProcessStore("a"), InProcessStore("gone")
    outbox = tmp_path / "outbox"
    with Ledger(tmp_path / "l.jsonl") as ledger:
        fact_id = _written(ledger, a, gone)
        custody = Custody(ledger, [a], outbox=outbox)  # "gone" left out: its entry stays owed
        anyio.run(lambda: getattr(custody, flow)(fact_id=fact_id, actor="x", reason="r"))
        caplog.clear()
        with caplog.at_level(logging.INFO):
            resumed = anyio.run(Custody(ledger, [a, gone], outbox=Outbox(outbox)).resume)
    assert resumed is not None and resumed.finished[fact_id].verification == {"gone": "verified"}
    summary = resumed.summary()
    assert summary.startswith("outbox: finished the owed store removals of 1 facts (0 removals")
    [finished] = [line for line in _outbox_lines(caplog) if "finished" in line]
    assert f"finished the owed removal of fact {fact_id} ({flow}; left by a process" in finished
    assert "or that had the store not configured or moved" in finished
    assert all("crash" not in line for line in [summary, *_outbox_lines(caplog)])


def _refusing_certificates(monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk refuses every certificate (as a kill before it is kept); intents are written."""
    real = archive.write_new

    def full(path: Path, data: bytes, **kw: Any) -> None:
        if path.suffix == ".json":
            raise OSError(28, "No space left on device")
        real(path, data, **kw)

    monkeypatch.setattr(archive, "write_new", full)


def _recovered_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, configured_at_start: list[str]
) -> dict[str, dict[str, Any]]:
    """A fact in ``a`` and ``gone`` forgotten by a process with ``a`` only, its certificate
    refused; a start with ``configured_at_start`` issues it from the intent. Its stores, by
    name, after ``certificate verify`` accepted it."""
    assert main(["keygen", "--out", str(tmp_path / "k")]) == 0
    certs = tmp_path / "certs"
    certs.mkdir()
    a, gone = InProcessStore("a"), InProcessStore("gone")
    stores = {"a": a, "gone": gone}
    options: dict[str, Any] = {"certificate_key": str(tmp_path / "k"), "certificates": certs}
    with Ledger(tmp_path / "l.jsonl") as ledger:
        fact_id = _written(ledger, a, gone)
        custody = Custody(ledger, [a], outbox=tmp_path / "outbox", **options)
        with monkeypatch.context() as patched:
            _refusing_certificates(patched)
            anyio.run(lambda: custody.forget(fact_id=fact_id, actor="x", reason="r"))
        assert list(certs.glob("*.json")) == [] and list(certs.glob(".intent-*"))
        later = [stores[name] for name in configured_at_start]
        anyio.run(Custody(ledger, later, outbox=Outbox(tmp_path / "outbox"), **options).resume)
    path = certs / f"{fact_id}.json"
    assert main(["certificate", "verify", str(path), "--key", f"{tmp_path / 'k'}.pub"]) == 0
    predicate = json.loads(base64.b64decode(json.loads(path.read_bytes())["payload"]))
    assert "recovered" in predicate["predicate"] and predicate["predicate"]["outcome"] == "partial"
    return {e["name"]: e for e in predicate["predicate"]["stores"]["stores"]}


def test_a_recovered_certificate_says_a_start_here_leaves_an_unconfigured_stores_removal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entries = _recovered_at_start(tmp_path, monkeypatch, ["a"])
    assert entries["a"] == {
        "name": "a",
        "acknowledged": False,
        "verification": "unknown",
        "error": STORES_UNKNOWN,
    }
    assert entries["gone"] == {
        "name": "gone",
        "acknowledged": False,
        "verification": "notConfigured",
        "error": NOT_HERE.format(name="gone"),
    }
    error = entries["gone"]["error"]
    assert "store gone is not configured in the process that issued it" in error
    assert error.endswith(LEFT_ELSEWHERE) and "finishes the removal at the next start" not in error


def test_a_store_configured_at_the_recovering_start_is_left_to_its_outbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entries = _recovered_at_start(tmp_path, monkeypatch, ["a", "gone"])
    assert {name: (e["verification"], e["error"]) for name, e in entries.items()} == {
        "a": ("unknown", STORES_UNKNOWN),
        "gone": ("unknown", STORES_UNKNOWN),
    }


def test_a_stopped_sweep_says_the_same_of_who_finishes_it() -> None:
    """One text for both (no copy): a stopped sweep's words end with the same sentence."""
    assert ELSEWHERE.endswith(", " + LEFT_ELSEWHERE)
    assert NOT_HERE.endswith(", " + LEFT_ELSEWHERE)

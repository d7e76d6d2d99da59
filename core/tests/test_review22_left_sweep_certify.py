"""A sweep whose certificates fail at its end carries what it did (twenty-second review, left).

``Ledger.sweep`` raised ``CertificateNotMade`` at its normal end with no ``sweep_result``, as a
stopped sweep carries one: a caller of the ledger learned the facts only from the error's
``events``, and the custody flow (``Custody.sweep``, the ``sweep`` command, ``memory.sweep``)
rebuilt the forgotten facts from the ledger's history and lost the facts on hold the sweep met:
``sweep --json`` printed ``"held": []`` though a fact was kept for its hold. The error now
carries the sweep's result (its forgotten facts and held ones, no certificates).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state import Ledger
from agent_custody_state.cli import main
from agent_custody_state.ledger import certifying
from agent_custody_state.ledger.certifying import CertificateNotMade
from agent_custody_state.ledger.stopped import stopped_result
from agent_custody_state.server.signing import generate_key_pair
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.sweep_stopped import swept_before

FACT: dict[str, Any] = {"space": "o", "subject": "s", "predicate": "p", "actor": "a"}
BEFORE = "2999-01-01T00:00:00Z"


@pytest.fixture(autouse=True)
def failing_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    """The byte scan fails (a file it may not read), after the sweep's forgets."""

    def scan(*_: Any, **__: Any) -> Any:
        raise PermissionError(13, "Permission denied", "/data/ledger.jsonl")

    monkeypatch.setattr(certifying, "scan_files", scan)


def _facts(ledger: Ledger) -> tuple[list[str], str]:
    """Three facts, the first on hold: the two others forgotten, the held one met."""
    ids = [ledger.assert_fact(**FACT, value=f"v{i}").fact.fact_id for i in range(3)]
    ledger.hold(fact_id=ids[0], actor="a", reason="legal")
    return ids[1:], ids[0]


def test_the_ledgers_error_carries_the_sweeps_result(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.jsonl", checkpoint_key=Ed25519PrivateKey.generate()) as ledger:
        gone, held = _facts(ledger)
        with pytest.raises(CertificateNotMade) as caught:
            ledger.sweep(before=BEFORE, actor="a", reason="r", certificates=True)
        result = stopped_result(caught.value)
        assert result is not None
        assert sorted(e.fact_id for e in result.forgotten) == sorted(gone)
        assert [e.event_id for e in result.forgotten] == [e.event_id for e in caught.value.events]
        assert result.held == [held] and result.certificates == {}


def test_the_custody_flow_reports_the_held_facts(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.jsonl") as ledger:
        gone, held = _facts(ledger)
        custody = Custody(ledger, certificate_key=Ed25519PrivateKey.generate())
        with pytest.raises(CertificateNotMade) as caught:
            anyio.run(
                lambda: custody.sweep(actor="a", reason="r", before=BEFORE, certificates=True)
            )
    report = swept_before(caught.value)
    assert report is not None
    assert sorted(s.event.fact_id for s in report.forgotten) == sorted(gone)
    assert report.held == [held]


def test_sweep_json_prints_what_it_forgot_and_held(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    location, folder = tmp_path / "l.jsonl", tmp_path / "certs"
    folder.mkdir()
    with Ledger(location) as ledger:
        gone, held = _facts(ledger)
    key, _, _ = generate_key_pair(tmp_path / "k")
    argv = ["sweep", "--ledger", str(location), "--before", BEFORE, "--reason", "r", "--json"]
    assert main([*argv, "--certificates", str(folder), "--key", str(key)]) == 1
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert sorted(item["factId"] for item in data["forgotten"]) == sorted(gone)
    assert data["held"] == [held]
    assert "their erasure certificates could not be made" in err
    # It did not stop part-way: nothing is left to sweep again, and the message says so once.
    assert "the sweep finished" in err and "run the sweep again" not in err
    # The recovered certificates the error promises are in the folder.
    assert sorted(p.stem for p in folder.glob("*.json")) == sorted(gone)

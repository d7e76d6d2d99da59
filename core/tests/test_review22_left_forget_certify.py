"""A forget whose certificate fails still leaves the stores (twenty-second review, left).

``Custody.forget(certificate=True)``: the ledger committed the forget, then making its
certificate failed (``CertificateNotMade``). The flow took that for a failure that may not have
committed and raised at once: the erased value stayed in every store holding it, for good
without an outbox, else until the next start (logged there as "interrupted by a crash"), while
the error said "the value is erased". ``OwnForget`` now takes the forget's event from the error
(its ids settle the erasure intent), the flow removes the value from the stores and settles
the outbox, then raises the error. The recovered certificate is the one of that forget.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state import Ledger
from agent_custody_state.ledger import certifying
from agent_custody_state.ledger.certifying import CertificateNotMade
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.stores.archive import CertificateArchive
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore, MemoryVendor
from agent_custody_state.stores.outbox import Outbox

SECRET = "gil.review22-left+secret@example.org"


def _fail_scans(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on the byte scan fails (a file it may not read), after the forget."""

    def scan(*_: Any, **__: Any) -> Any:
        raise PermissionError(13, "Permission denied", "/data/ledger.jsonl")

    monkeypatch.setattr(certifying, "scan_files", scan)


@pytest.fixture
def failing_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    _fail_scans(monkeypatch)


def _custody(ledger: Ledger, vendor: MemoryVendor, folder: Path, outbox: Path | None) -> Custody:
    return Custody(
        ledger,
        [InProcessStore("vec", vendor)],
        certificate_key=Ed25519PrivateKey.generate(),
        certificates=folder,
        outbox=outbox,
    )


@pytest.mark.parametrize("with_outbox", [False, True])
def test_the_stores_lose_the_value_and_the_error_still_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_outbox: bool
) -> None:
    folder = tmp_path / "certs"
    CertificateArchive(folder).prepare()
    vendor = MemoryVendor()
    outbox = tmp_path / "l.jsonl.outbox" if with_outbox else None
    with Ledger(tmp_path / "l.jsonl") as ledger:
        custody = _custody(ledger, vendor, folder, outbox)
        request = AssertRequest(subject="s", predicate="p", value=SECRET, space="o", actor="a")
        fact_id = anyio.run(custody.write, request).event.fact.fact_id
        assert [row["value"] for row in vendor.rows.values()] == [SECRET]
        _fail_scans(monkeypatch)  # from here on: the write above scanned nothing
        with pytest.raises(CertificateNotMade) as caught:
            anyio.run(
                lambda: custody.forget(fact_id=fact_id, actor="a", reason="r", certificate=True)
            )
        forget_id = ledger.history(fact_id)[-1].event_id
        assert [e.event_id for e in caught.value.events] == [forget_id]
        assert ledger.status(fact_id) == ("forgotten", False)
        assert vendor.rows == {}  # removed in the flow, not left for a start that may not come
        if outbox is not None:
            assert Outbox(outbox).pending() == []  # settled: nothing for the next start
    # The intent settled by the forget's own id: a recovered certificate of that forget.
    assert not list(folder.glob(".intent-*"))
    [kept] = folder.glob("*.json")
    statement = json.loads(base64.b64decode(json.loads(kept.read_bytes())["payload"]))
    assert statement["predicate"]["request"]["forgetEventId"] == forget_id
    assert "recovered" in statement["predicate"]
    assert SECRET.encode() not in kept.read_bytes()


@pytest.mark.usefixtures("failing_scan")
def test_a_refused_forget_is_still_refused_untouched(tmp_path: Path) -> None:
    """A ledger refusal is no ``CertificateNotMade``: nothing changes, no store is asked."""
    folder = tmp_path / "certs"
    CertificateArchive(folder).prepare()
    vendor = MemoryVendor()
    with Ledger(tmp_path / "l.jsonl") as ledger:
        custody = _custody(ledger, vendor, folder, None)
        request = AssertRequest(subject="s", predicate="p", value=SECRET, space="o", actor="a")
        fact_id = anyio.run(custody.write, request).event.fact.fact_id
        ledger.hold(fact_id=fact_id, actor="a", reason="legal")
        with pytest.raises(Exception) as caught:
            anyio.run(
                lambda: custody.forget(fact_id=fact_id, actor="a", reason="r", certificate=True)
            )
        assert not isinstance(caught.value, CertificateNotMade)
        assert [row["value"] for row in vendor.rows.values()] == [SECRET]
    assert not list(folder.iterdir())

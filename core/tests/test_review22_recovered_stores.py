"""A recovered certificate names what the flow found in the stores (twenty-second review).

When a forget's certificate failed after its commit (``CertificateNotMade``: here the byte scan
may not read a file), the custody flow removes and verifies the value in the stores, then
settles its erasure intent, which writes a ``recovered`` certificate into the folder. It named
every store ``unknown`` ("not checked ... the process stopped, or the disk refused it"), though
this process had just checked them: a store that removed the value read as unknown, one that
still held it as unknown too. The same for a sweep whose pass's certificates failed. Each
store's entry is now built from the flow's removal report, as a certificate made at once builds
it (``stores.certificate.stores_part``); the certificate still says the byte scan was not done
(``recovered``, outcome partial), and ``certificate verify`` accepts it.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main
from agent_custody_state.ledger import certifying
from agent_custody_state.ledger.certifying import CertificateNotMade
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore

FAR = "2999-01-01T00:00:00Z"


def _fail_scans(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on the byte scan fails (a file it may not read), after the forgets."""

    def scan(*_: Any, **__: Any) -> Any:
        raise PermissionError(13, "Permission denied", "/data/ledger.jsonl")

    monkeypatch.setattr(certifying, "scan_files", scan)


async def _refuse(external_id: str, fact: Any) -> None:
    raise RuntimeError("graph is read-only")


def _world(tmp_path: Path, count: int) -> tuple[Ledger, Custody, list[InProcessStore], list[str]]:
    """``count`` facts held by ``vec`` and ``graph``; a custody keeping certificates."""
    assert main(["keygen", "--out", str(tmp_path / "k")]) == 0
    (tmp_path / "certs").mkdir()
    stores = [InProcessStore("vec"), InProcessStore("graph")]
    ledger = Ledger(tmp_path / "l.jsonl")
    custody = Custody(
        ledger, stores, certificate_key=str(tmp_path / "k"), certificates=tmp_path / "certs"
    )
    ids = []
    for number in range(count):
        request = AssertRequest(
            subject=f"s{number}", predicate="p", value="v", space="o", actor="a"
        )
        ids.append(anyio.run(custody.write, request).event.fact.fact_id)
    return ledger, custody, stores, ids


def _recovered(tmp_path: Path, fact_id: str) -> dict[str, Any]:
    """The fact's certificate in the folder, verified; its predicate."""
    path = tmp_path / "certs" / f"{fact_id}.json"
    assert main(["certificate", "verify", str(path), "--key", f"{tmp_path / 'k'}.pub"]) == 0
    predicate: dict[str, Any] = json.loads(
        base64.b64decode(json.loads(path.read_bytes())["payload"])
    )["predicate"]
    assert "recovered" in predicate  # issued from the intent: the byte scan was not done
    assert predicate["verification"]["byteScan"]["scanned"] is False
    assert predicate["outcome"] == "partial"
    return predicate


def _by_name(predicate: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["name"]: entry for entry in predicate["stores"]["stores"]}


def test_a_forgets_recovered_certificate_names_what_each_store_did(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, custody, (vec, graph), (fact_id,) = _world(tmp_path, 1)
    graph.remove = _refuse  # type: ignore[method-assign]
    _fail_scans(monkeypatch)
    with pytest.raises(CertificateNotMade):
        anyio.run(lambda: custody.forget(fact_id=fact_id, actor="a", reason="r", certificate=True))
    ledger.close()
    predicate = _recovered(tmp_path, fact_id)
    entries = _by_name(predicate)
    assert entries["vec"] == {"name": "vec", "acknowledged": True, "verification": "verified"}
    assert entries["graph"]["verification"] == "failed"
    assert entries["graph"]["acknowledged"] is False
    assert "graph is read-only" in entries["graph"]["error"]
    # A store still holding the value: something was found left, not merely unchecked.
    assert predicate["verification"]["result"] == "failed"
    assert "store graph: failed" in predicate["incomplete"]
    assert not vec.vendor.rows and len(graph.vendor.rows) == 1


def test_a_forget_removed_everywhere_is_verified_in_every_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, custody, stores, (fact_id,) = _world(tmp_path, 1)
    _fail_scans(monkeypatch)
    with pytest.raises(CertificateNotMade):
        anyio.run(lambda: custody.forget(fact_id=fact_id, actor="a", reason="r", certificate=True))
    ledger.close()
    predicate = _recovered(tmp_path, fact_id)
    assert {n: e["verification"] for n, e in _by_name(predicate).items()} == {
        "vec": "verified",
        "graph": "verified",
    }
    assert all("error" not in entry for entry in predicate["stores"]["stores"])
    # Only the byte scan is missing: not verified, never "passed".
    assert predicate["verification"]["result"] == "not verified"
    assert all(not store.vendor.rows for store in stores)


def test_a_sweeps_recovered_certificates_name_what_each_store_did(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, custody, (vec, graph), ids = _world(tmp_path, 2)
    graph.remove = _refuse  # type: ignore[method-assign]
    _fail_scans(monkeypatch)
    with pytest.raises(CertificateNotMade):
        anyio.run(lambda: custody.sweep(before=FAR, actor="a", reason="r", certificates=True))
    ledger.close()
    assert not list((tmp_path / "certs").glob(".intent-*"))  # settled by the flow
    for fact_id in ids:
        predicate = _recovered(tmp_path, fact_id)
        entries = _by_name(predicate)
        assert entries["vec"]["verification"] == "verified" and entries["vec"]["acknowledged"]
        assert entries["graph"]["verification"] == "failed"
        assert "graph is read-only" in entries["graph"]["error"]
        assert predicate["verification"]["result"] == "failed"
    assert not vec.vendor.rows and len(graph.vendor.rows) == 2

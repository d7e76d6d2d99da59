"""A stopped sweep's certificates say which store was asked (twenty-second review).

A second Ctrl-C (or a cancel) that cuts a store's removal mid-call left that fact's stores
named "not asked: the sweep was stopped before it reached this store" in a signed certificate,
though the removal had been sent (and here carried out). The flow now tells apart the store it
was waiting on (asked, no answer), the one whose removal was answered and whose check was cut
(removed, not checked), and those after it (not asked); the stores that answered before keep
what they answered. The removal stays owed in the outbox, and the next start finishes it. Each
test fails without its fix.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state.cli import main
from agent_custody_state.cli.sweep_unfinished import interrupted
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore
from agent_custody_state.stores.outbox import Outbox
from agent_custody_state.stores.sweep_interrupt import NO_ANSWER, NOT_ASKED, NOT_CHECKED

FAR = "2999-01-01T00:00:00Z"


def _stores(tmp_path: Path, count: int) -> tuple[Ledger, list[InProcessStore], list[str]]:
    """``count`` facts, each held by the stores ``a``, ``b`` and ``c`` (asked in that order)."""
    assert main(["keygen", "--out", str(tmp_path / "k")]) == 0
    (tmp_path / "certs").mkdir()
    stores = [InProcessStore(name) for name in "abc"]
    ledger = Ledger(str(tmp_path / "l.jsonl"))
    custody = Custody(ledger, stores)
    ids = []
    for number in range(count):
        request = AssertRequest(
            subject=f"s{number}", predicate="p", value="v", space="o", actor="a"
        )
        ids.append(anyio.run(custody.write, request).event.fact.fact_id)
    return ledger, stores, ids


def _sweep_cut(tmp_path: Path, ledger: Ledger, stores: list[InProcessStore]) -> Any:
    """Sweep with certificates and an outbox until the second Ctrl-C; its report."""
    custody = Custody(
        ledger,
        stores,
        certificate_key=str(tmp_path / "k"),
        certificates=tmp_path / "certs",
        outbox=Outbox(tmp_path / "outbox"),
    )
    with pytest.raises(KeyboardInterrupt) as stopped:
        anyio.run(
            lambda: custody.sweep(before=FAR, actor="a", reason="r", certificates=True, stop=None)
        )
    return stopped.value


def _entries(tmp_path: Path, fact_id: str) -> dict[str, dict[str, Any]]:
    envelope = json.loads((tmp_path / "certs" / f"{fact_id}.json").read_text())
    predicate = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
    assert predicate["outcome"] == "partial"
    return {entry["name"]: entry for entry in predicate["stores"]["stores"]}


def test_a_removal_cut_mid_call_is_certified_as_asked_not_answered(tmp_path: Path) -> None:
    ledger, stores, (first, second) = _stores(tmp_path, 2)
    removing = stores[1].remove

    async def cut(external_id: str, fact: Any) -> None:
        await removing(external_id, fact)  # sent, and carried out by the store
        raise KeyboardInterrupt  # the second Ctrl-C, before its answer is read

    stores[1].remove = cut  # type: ignore[method-assign]
    exc = _sweep_cut(tmp_path, ledger, stores)
    entries = _entries(tmp_path, first)
    assert entries["a"]["verification"] == "verified" and entries["a"]["acknowledged"]
    assert entries["b"] == {
        "name": "b",
        "acknowledged": False,
        "verification": "unknown",
        "error": NO_ANSWER,
    }
    assert entries["c"]["verification"] == "unknown" and entries["c"]["error"] == NOT_ASKED
    assert len(stores[2].vendor.rows) == 2  # c was never asked
    later = _entries(tmp_path, second)  # the fact after it: no store asked
    assert {name: e["error"] for name, e in later.items()} == dict.fromkeys("abc", NOT_ASKED)
    # the report printed says the same, and the command counts both removals as owed
    report = exc.swept
    cut_fact = next(s for s in report.forgotten if s.event.fact_id == first)
    assert cut_fact.removal.still_held == {"b": NO_ANSWER, "c": NOT_ASKED}
    assert cut_fact.removal.verification == {"a": "verified"}
    told = interrupted(exc, report, None, Outbox(tmp_path / "outbox"), True)
    assert "the removals of 2 facts from the stores are kept in" in told
    unkept = interrupted(exc, report, None, None, True)  # no outbox: "not told" was untrue
    assert "the removals of 2 facts from the stores were not finished" in unkept
    # the certificate verifies, and the next start finishes the owed removals
    path = tmp_path / "certs" / f"{first}.json"
    assert main(["certificate", "verify", str(path), "--key", f"{tmp_path / 'k'}.pub"]) == 0
    stores[1].remove = removing  # type: ignore[method-assign]
    resumed = anyio.run(Custody(ledger, stores, outbox=Outbox(tmp_path / "outbox")).resume)
    assert resumed is not None
    assert all(not store.vendor.rows for store in stores)
    ledger.close()


def test_a_check_cut_after_the_store_answered_is_certified_as_removed_not_checked(
    tmp_path: Path,
) -> None:
    ledger, stores, (only,) = _stores(tmp_path, 1)

    async def cut(external_id: str, fact: Any) -> bool:
        raise KeyboardInterrupt  # the second Ctrl-C while b's removal is checked

    stores[1].verify_removed = cut  # type: ignore[method-assign]
    _sweep_cut(tmp_path, ledger, stores)
    entries = _entries(tmp_path, only)
    assert entries["a"]["verification"] == "verified"
    assert entries["b"] == {
        "name": "b",
        "acknowledged": True,
        "verification": "unknown",
        "error": NOT_CHECKED,
    }
    assert entries["c"]["error"] == NOT_ASKED
    assert not stores[1].vendor.rows and len(stores[2].vendor.rows) == 1
    ledger.close()

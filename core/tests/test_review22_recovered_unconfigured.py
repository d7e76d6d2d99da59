"""A stopped sweep does not promise the outbox finishes a store not configured here (twenty-
second review).

``sweep_interrupt.unasked`` named every store of a fact the stop did not reach "not asked ...
the outbox, when kept, finishes the removal at the next start", and its certificate entry
``unknown``, also a store the ledger records the fact in that is not configured in this
process. The outbox cannot finish that one: its entry stays owed, a start with this
configuration leaves it ("not configured here; its copy is owed"), and only a process with the
store configured removes the copy. The entry now says so, with ``StoreSet.report_unconfigured``'s
words (as a finished sweep and a cut one say it), and the certificate names it
``notConfigured``.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import anyio
import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore
from agent_custody_state.stores.outbox import Outbox
from agent_custody_state.stores.sweep_interrupt import (
    ELSEWHERE,
    NOT_ASKED,
    SweepInterrupted,
    owed_by_stop,
)

FAR = "2999-01-01T00:00:00Z"


def test_a_store_not_configured_is_not_left_to_the_outbox_of_this_configuration(
    tmp_path: Path,
) -> None:
    assert main(["keygen", "--out", str(tmp_path / "k")]) == 0
    (tmp_path / "certs").mkdir()
    a, gone = InProcessStore("a"), InProcessStore("gone")
    outbox = tmp_path / "outbox"
    with Ledger(tmp_path / "l.jsonl") as ledger:
        for number in range(2):
            request = AssertRequest(
                subject=f"s{number}", predicate="p", value="v", space="o", actor="a"
            )
            anyio.run(Custody(ledger, [a, gone]).write, request)
        stages: list[str] = []
        custody = Custody(  # "gone" is no longer configured
            ledger,
            [a],
            certificate_key=str(tmp_path / "k"),
            certificates=tmp_path / "certs",
            outbox=outbox,
        )
        with pytest.raises(SweepInterrupted) as stopped:
            anyio.run(
                lambda: custody.sweep(
                    before=FAR,
                    actor="a",
                    reason="r",
                    certificates=True,
                    progress=lambda stage, done, total: stages.append(stage),
                    stop=lambda: "stores" in stages,  # before the second fact's stores
                )
            )
        report = stopped.value.swept  # type: ignore[attr-defined]
        (unreached,) = [s for s in report.forgotten if s.removal.still_held.get("a") == NOT_ASKED]
        held = unreached.removal.still_held
        [recorded] = [e for e in ledger.history(unreached.event.fact_id) if e.kind == "assert"]
        copy_id = recorded.fact.external["gone"]  # type: ignore[attr-defined]
        assert held["gone"] == (
            f"store gone is not configured here, so its copy (id {copy_id}) was neither removed "
            f"nor checked{ELSEWHERE}"
        )
        assert owed_by_stop(unreached.removal)  # "a" is owed, and the next start finishes it
        envelope = json.loads((tmp_path / "certs" / f"{unreached.event.fact_id}.json").read_text())
        entries = {
            e["name"]: e
            for e in json.loads(base64.b64decode(envelope["payload"]))["predicate"]["stores"][
                "stores"
            ]
        }
        assert entries["a"]["verification"] == "unknown"
        assert entries["gone"]["verification"] == "notConfigured"
        assert entries["gone"]["error"] == held["gone"]
        # What the words say: a start here finishes "a" and leaves "gone" owed (both facts'
        # copies: the swept one's too, ``test_review22_unconfigured_owed``)...
        resumed = anyio.run(Custody(ledger, [a], outbox=Outbox(outbox)).resume)
        assert resumed is not None and sorted(resumed.left.values()) == sorted(
            f"store gone is not configured here; its copy (id {held}) is owed"
            for held in gone.vendor.rows
        )
        assert not a.vendor.rows and copy_id in gone.vendor.rows and len(gone.vendor.rows) == 2
        # ...and a process with "gone" configured removes its copies.
        anyio.run(Custody(ledger, [a, gone], outbox=Outbox(outbox)).resume)
        assert not gone.vendor.rows
        assert Outbox(outbox).pending() == []

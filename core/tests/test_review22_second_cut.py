"""A sweep cut mid-call still names the store that is not configured (twenty-second review,
second wave).

``sweep_interrupt.cut_short`` rebuilt the removal report of the fact whose stores a second
Ctrl-C cut from what the configured stores had answered, in their order. ``StoreSet.remove_all``
names a store the ledger records the fact in but that is not configured here only at its end
(``still_held``: "not configured here, so its copy ... was neither removed nor checked"), which
a cut never reaches: that store dropped out of the report (``sweep --json``'s ``stillHeld``, the
command's count of values still held) and its certificate entry lost its error, though nothing
had removed its copy. Before ``cut_short`` every store of the fact was named "not asked".
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state.cli import main
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore
from agent_custody_state.stores.outbox import Outbox
from agent_custody_state.stores.sweep_interrupt import NO_ANSWER

FAR = "2999-01-01T00:00:00Z"


def test_a_cut_removal_still_names_the_unconfigured_store(tmp_path: Path) -> None:
    assert main(["keygen", "--out", str(tmp_path / "k")]) == 0
    (tmp_path / "certs").mkdir()
    a, b, gone = (InProcessStore(name) for name in ("a", "b", "gone"))
    with Ledger(str(tmp_path / "l.jsonl")) as ledger:
        request = AssertRequest(subject="s", predicate="p", value="v", space="o", actor="a")
        fact_id = anyio.run(Custody(ledger, [a, b, gone]).write, request).event.fact.fact_id
        removing = b.remove

        async def cut(external_id: str, fact: Any) -> None:
            await removing(external_id, fact)
            raise KeyboardInterrupt  # the second Ctrl-C, before b's answer is read

        b.remove = cut  # type: ignore[method-assign]
        custody = Custody(  # "gone" is no longer configured
            ledger,
            [a, b],
            certificate_key=str(tmp_path / "k"),
            certificates=tmp_path / "certs",
            outbox=Outbox(tmp_path / "outbox"),
        )
        with pytest.raises(KeyboardInterrupt) as stopped:
            anyio.run(lambda: custody.sweep(before=FAR, actor="a", reason="r", certificates=True))
    (swept,) = stopped.value.swept.forgotten  # type: ignore[attr-defined]
    assert swept.removal.still_held["b"] == NO_ANSWER
    assert "gone is not configured here" in swept.removal.still_held["gone"]
    assert any("gone" in problem for problem in stopped.value.swept.problems())  # type: ignore[attr-defined]
    envelope = json.loads((tmp_path / "certs" / f"{fact_id}.json").read_text())
    entries = {
        e["name"]: e
        for e in json.loads(base64.b64decode(envelope["payload"]))["predicate"]["stores"]["stores"]
    }
    assert entries["gone"]["verification"] == "notConfigured"
    assert "gone is not configured here" in entries["gone"]["error"]
    assert len(gone.vendor.rows) == 1  # nothing removed its copy

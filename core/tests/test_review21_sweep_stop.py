"""A sweep its caller stops (twenty-first review): every forgotten fact's certificate is kept
on the way out, ``sweep --json`` prints what was done, and an intent left is not "live" for the
rest of the process. Each test fails without its fix."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state.cli import main
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.stores import sweep_interrupt
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore
from agent_custody_state.stores.sweep_interrupt import SweepInterrupted

FAR = "2999-01-01T00:00:00Z"


def _predicates(folder: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for path in folder.glob("*.json"):
        envelope = json.loads(path.read_text())
        found[path.stem] = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
    return found


def _filled(tmp_path: Path, count: int) -> tuple[Ledger, InProcessStore, list[str]]:
    assert main(["keygen", "--out", str(tmp_path / "k")]) == 0
    (tmp_path / "certs").mkdir()
    store = InProcessStore("mem")
    ledger = Ledger(str(tmp_path / "l.jsonl"))
    custody = Custody(ledger, [store])
    ids = []
    for number in range(count):
        request = AssertRequest(
            subject=f"s{number}", predicate="p", value="v", space="o", actor="a"
        )
        ids.append(anyio.run(custody.write, request).event.fact.fact_id)
    return ledger, store, ids


def test_a_stopped_sweep_keeps_every_forgotten_facts_full_certificate(tmp_path: Path) -> None:
    """Stopped after the first fact's stores: the rest were forgotten with their byte scan made,
    but their certificates were dropped (a ``recovered`` one, without the scan, at the next
    start). Now each is kept at once: the verified one complete, the others naming the store
    not asked as ``unknown``; the intent is dropped (nothing is owed)."""
    ledger, store, ids = _filled(tmp_path, 4)
    asked: list[str] = []
    custody = Custody(
        ledger, [store], certificate_key=str(tmp_path / "k"), certificates=tmp_path / "certs"
    )

    def progress(stage: str, done: int, total: int) -> None:
        asked.append(stage)

    with pytest.raises(SweepInterrupted) as stopped:
        anyio.run(
            lambda: custody.sweep(
                before=FAR,
                actor="a",
                reason="r",
                progress=progress,
                stop=lambda: asked.count("stores") >= 1,
            )
        )
    report = stopped.value.swept  # type: ignore[attr-defined]
    assert sorted(s.event.fact_id for s in report.forgotten) == sorted(ids)
    predicates = _predicates(tmp_path / "certs")
    assert sorted(predicates) == sorted(ids)
    outcomes = sorted(p["stores"]["stores"][0]["verification"] for p in predicates.values())
    assert outcomes == ["unknown", "unknown", "unknown", "verified"]
    assert all(
        "recovered" not in p and p["verification"]["byteScan"].get("files")
        for p in predicates.values()
    )
    assert not list((tmp_path / "certs").glob(".intent-*"))
    assert len(store.vendor.rows) == 3  # no store was asked after the stop
    ledger.close()


def test_an_intent_left_by_a_stop_is_finished_by_a_later_resume_in_the_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no time left to keep them (``KEEP_SECONDS``), the certificates wait in the intent;
    it stayed "live" for the rest of the process, so a later ``resume`` in it skipped it."""
    monkeypatch.setattr(sweep_interrupt, "KEEP_SECONDS", 0.0)
    ledger, store, ids = _filled(tmp_path, 2)
    custody = Custody(
        ledger, [store], certificate_key=str(tmp_path / "k"), certificates=tmp_path / "certs"
    )
    with pytest.raises(SweepInterrupted):
        anyio.run(lambda: custody.sweep(before=FAR, actor="a", reason="r", stop=lambda: True))
    # stopped before the first forget: nothing forgotten, the intent left for ``resume``
    assert list((tmp_path / "certs").glob(".intent-*"))
    with pytest.raises(SweepInterrupted):
        anyio.run(
            lambda: custody.sweep(
                before=FAR,
                actor="a",
                reason="r",
                stop=lambda: bool(store.vendor.rows) and len(store.vendor.rows) < 2,
            )
        )
    [verified] = _predicates(tmp_path / "certs")  # kept as its stores were verified
    assert list((tmp_path / "certs").glob(".intent-*"))
    anyio.run(custody.resume)
    predicates = _predicates(tmp_path / "certs")
    assert sorted(predicates) == sorted(ids)
    assert [
        "recovered" in p for _, p in sorted(predicates.items(), key=lambda i: i[0] != verified)
    ] == [False, True]
    assert not list((tmp_path / "certs").glob(".intent-*"))
    ledger.close()


SCRIPT = """
import asyncio, sys
from pathlib import Path
import anyio
from agent_custody_state import storebuild
from agent_custody_state.cli import main
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore

tmp = Path(sys.argv[1])
store = InProcessStore("mem")
removing = store.remove
async def remove(external_id, fact):
    print("REMOVING", file=sys.stderr, flush=True)
    await asyncio.sleep(0.5)
    await removing(external_id, fact)
store.remove = remove
with Ledger(str(tmp / "l.jsonl")) as ledger:
    custody = Custody(ledger, [store])
    for number in range(5):
        request = AssertRequest(subject=f"s{number}", predicate="p", value="v", space="o", actor="a")
        anyio.run(lambda: custody.write(request))
storebuild.build_stores = lambda configs: [store]
(tmp / "c.toml").write_text(f'ledger = "{tmp / "l.jsonl"}"\\n[[stores]]\\ntype = "memory"\\nname = "mem"\\n')
sys.exit(main(["sweep", "--config", str(tmp / "c.toml"), "--before", "2999-01-01T00:00:00Z",
               "--reason", "r", "--certificates", str(tmp / "certs"), "--key", str(tmp / "k"),
               "--json"]))
"""


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_sweep_json_stopped_by_a_signal_prints_what_was_done(
    tmp_path: Path, sig: signal.Signals, status: int
) -> None:
    """Ctrl-C only cancelled the command's task: the flow ran on (up to 30 s), then the command
    exited 130 with nothing on standard output; SIGTERM killed it outright, keeping nothing.
    Now the sweep stops before its next fact, prints its JSON marked ``interrupted``, keeps
    every certificate, and exits 128 + the signal."""
    child = sweep_child(tmp_path, SCRIPT)
    assert child.stderr is not None
    deadline = time.monotonic() + 60
    while "REMOVING" not in (child.stderr.readline() or "REMOVING") and time.monotonic() < deadline:
        pass
    child.send_signal(sig)
    out, err = child.communicate(timeout=60)
    assert child.returncode == status, err
    data = json.loads(out)
    assert data["interrupted"] == sig.name
    assert len(data["forgotten"]) == 5 and len(data["stillHeld"]) >= 3
    assert all("certificate" in item for item in data["forgotten"])
    assert sorted(_predicates(tmp_path / "certs")) == sorted(i["factId"] for i in data["forgotten"])
    assert "sweep interrupted after forgetting 5 facts" in err
    assert os.path.exists(tmp_path / "l.jsonl.outbox")


def sweep_child(tmp_path: Path, script: str) -> subprocess.Popen[str]:
    """``script`` (``SCRIPT`` or a variant) run in a child over ``tmp_path``, with a key and a
    certificates folder: a ``sweep --json`` whose first store removal it prints ``REMOVING``
    for on standard error."""
    assert main(["keygen", "--out", str(tmp_path / "k")]) == 0
    (tmp_path / "certs").mkdir()
    (tmp_path / "run.py").write_text(script)
    return subprocess.Popen(
        [sys.executable, str(tmp_path / "run.py"), str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

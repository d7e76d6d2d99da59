"""Whose an outbox entry is: the writer's pid and, on Linux, its start (boot and start time).

An entry was judged in flight while its pid was running. After a reboot, or once the pid is
reused, another process holds it: the removals it owed were never resumed (the next start said
"in flight in process N" for good). Entries now record their writer's start, and a pid held by
another process is not the writer. Lines written before keep the pid-only judgement.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from agent_custody_state.stores.outbox import Outbox
from agent_custody_state.stores.outbox_file import own_start, process_start

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="a process's start is read from Linux's /proc"
)

ENTRY = {
    "owe": "e1",
    "factId": "f",
    "store": "vectors",
    "externalId": "x",
    "operation": "forget",
    "at": "2026-01-01T00:00:00Z",
}


def box_with(tmp_path: Path, **entry: object) -> Outbox:
    path = tmp_path / "ledger.jsonl.outbox"
    path.write_text(json.dumps({**ENTRY, **entry}) + "\n")
    return Outbox(path)


def test_a_running_pid_of_another_process_is_not_the_writer(tmp_path: Path) -> None:
    parent = os.getppid()  # running, and not this process
    assert process_start(parent) is not None
    box = box_with(tmp_path, pid=parent, started="an-earlier-boot:12345")
    (owed,) = box.pending()
    assert owed.started == "an-earlier-boot:12345"
    assert not box.in_flight(owed)  # resumable: its writer is gone


def test_the_writer_itself_still_runs_and_older_lines_keep_the_pid_rule(tmp_path: Path) -> None:
    parent = os.getppid()
    running = box_with(tmp_path, pid=parent, started=process_start(parent))
    assert running.in_flight(running.pending()[0])
    older = box_with(tmp_path, pid=parent)  # a line from before ``started``
    assert older.in_flight(older.pending()[0])


def test_entries_record_their_writers_start(tmp_path: Path) -> None:
    from agent_custody_state.ledger.model import Fact

    fact = Fact.from_dict(
        {
            "factId": "f1",
            "subject": "s",
            "predicate": "p",
            "value": 1,
            "space": "org",
            "validFrom": "2026-01-01T00:00:00.000Z",
            "validTo": None,
            "actor": "a",
            "confidence": None,
            "provenance": "claimed",
            "source": {"receiptId": None},
            "external": {"vectors": "x1"},
        }
    )
    box = Outbox(tmp_path / "l.jsonl.outbox")
    (owed,) = box.owe([fact], "forget", "2026-01-01T00:00:00.000Z")
    line = json.loads((tmp_path / "l.jsonl.outbox").read_text())
    assert line["started"] == own_start() == owed.started

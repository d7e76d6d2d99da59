"""The SPEC model's random histories on a SQLite ledger, and lines written by others.

The core's model tests (``core/tests/test_spec_model.py`` and
``test_review3_semantics_model.py``) run on the memory and JSONL backends; SQLite answers the
same reads with its own SQL (``events_along``, ``asserts_for_as_of``), so the same histories
are played here, with the file closed and reopened between operations. A ledger imported from
a newer writer keeps the keys inside its ``source`` objects in the ``json`` column (SPEC 1.2).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings

from agent_custody_state import Ledger
from agent_custody_state.ledger.model import event_from_json

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "core" / "tests"))
from test_review3_semantics_model import _case, drive_plus

EXAMPLES = int(os.environ.get("AGENT_CUSTODY_SPEC_MODEL_EXAMPLES", "200"))
_settings = settings(
    max_examples=max(5, EXAMPLES // 8), deadline=None, suppress_health_check=list(HealthCheck)
)


@_settings
@given(_case)
def test_sqlite_ledger_reopened_between_operations_matches_the_model(case: tuple[Any, ...]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.sqlite"
        drive_plus(lambda clock, key: Ledger(path, clock=clock, forget_key=key), case, reopens=True)


def test_a_long_sqlite_history_matches_the_model() -> None:
    """``test_spec_model``'s own cases, drawn long, on SQLite (one hypothesis run)."""
    from test_spec_model import _case as single_case
    from test_spec_model import drive_and_reopen

    @_settings
    @given(single_case)
    def check(case: Any) -> None:
        drive_and_reopen("ledger.sqlite", case)

    check()


def test_keys_inside_a_newer_writers_sources_are_kept(tmp_path: Path) -> None:
    source = {"receiptId": "r-1", "gateway": {"name": "gw"}}
    fact = {
        "factId": "f-1",
        "subject": "s",
        "predicate": "p",
        "value": 1,
        "space": "org",
        "actor": "a",
        "source": source,
        "provenance": "claimed",
        "validFrom": "2026-01-01T00:00:00.000Z",
        "validTo": None,
        "confidence": None,
    }
    events = [
        {
            "eventId": "e-1",
            "kind": "assert",
            "txTime": "2026-01-01T00:00:00.000Z",
            "fact": fact,
            "supersedes": None,
        },
        {
            "eventId": "e-2",
            "kind": "hold",
            "txTime": "2026-01-02T00:00:00.000Z",
            "factId": "f-1",
            "actor": "legal",
            "reason": "case",
            "source": {"receiptId": None, "ticket": "T-8"},
        },
    ]
    lines = [json.dumps(e, separators=(",", ":")) for e in events]
    path = tmp_path / "ledger.sqlite"
    with Ledger(path) as ledger:
        ledger.import_events([event_from_json(line) for line in lines], check_chain=False)
    with Ledger(path) as ledger:
        assert [event.to_json() for event in ledger.export()] == lines
        ledger.release(fact_id="f-1", actor="legal", reason="closed")
        ledger.forget(fact_id="f-1", actor="dpo", reason="erasure")
        stored = ledger.get("f-1")
    assert stored is not None and stored.to_dict()["source"] == source

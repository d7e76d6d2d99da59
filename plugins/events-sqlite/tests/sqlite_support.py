"""What the SQLite tests share: the table and indexes of SPEC section 3, reading a file's indexes
back, and the one fact most tests start from."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from agent_custody_state import Ledger
from agent_custody_state.ledger.model import AssertEvent

SPEC_DDL = (
    "CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT NOT NULL UNIQUE, "
    "kind TEXT NOT NULL, tx_time TEXT NOT NULL, fact_id TEXT NOT NULL, space TEXT, subject TEXT, "
    "predicate TEXT, supersedes TEXT, json TEXT NOT NULL)"
)
SPEC_INDEXES = {
    "events_fact": ["fact_id"],
    "events_subject": ["subject", "predicate"],
    "events_space": ["space", "tx_time"],
    "events_supersedes": ["supersedes"],
    "events_tx": ["tx_time"],
}


def index_columns(path: Path) -> dict[str, list[str]]:
    """The file's own indexes on ``events`` (SQLite's automatic ones left out) and their columns."""
    with sqlite3.connect(path) as db:
        names = [
            r[0]
            for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type='index' AND tbl_name='events' "
                "AND name NOT LIKE 'sqlite_autoindex%'"
            )
        ]
        return {n: [r[2] for r in db.execute(f"PRAGMA index_info({n})")] for n in names}


def assert_plan(ledger: Ledger, **kw: Any) -> AssertEvent:
    """Assert acct:42's plan in ``org``; ``kw`` overrides any argument (a supersession, a value)."""
    args: dict[str, Any] = {
        "subject": "acct:42",
        "predicate": "plan",
        "value": "pro",
        "space": "org",
        "actor": "agent",
    }
    args.update(kw)
    return ledger.assert_fact(**args)

"""Twentieth review, last part: a parsed Postgres location shows no password in its ``repr``
(a traceback's locals, a debugger, a test failure printed ``connect_url`` as given)."""

from __future__ import annotations

from agent_custody_state_events_postgres.location import parse_location

PASSWORD = "Sekr3t-Ledger-Pass"


def test_the_location_repr_shows_the_masked_url_only() -> None:
    where = parse_location(f"postgresql://u:{PASSWORD}@db.example/app?table=t")
    assert PASSWORD not in repr(where) and PASSWORD not in str(where)
    assert "display='postgresql://u:***@db.example/app?table=t'" in repr(where)
    assert PASSWORD in where.connect_url  # what the driver connects with is unchanged

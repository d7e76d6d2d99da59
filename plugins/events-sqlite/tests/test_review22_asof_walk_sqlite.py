"""As-of reads past a later retraction on SQLite (``core/tests/test_review22_asof_walk.py``).

SQLite walks a chain in SQL (``events_along``, ``asserts_around``): the same histories must give
the SPEC model's answers, and reading a fact by id past retracted links asks that one question
only (``queries.walk_from``: the retracted links it holds need no ``events_around`` of their own).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "core" / "tests"))
from specmodel import SpecModel
from test_review22_asof_walk import HISTORIES, SetClock, check_history, replay

from agent_custody_state import Ledger
from agent_custody_state.ledger.model import Event


@pytest.mark.parametrize("name", HISTORIES)
def test_sqlite_reads_at_a_time_before_a_later_retraction_match_the_model(
    name: str, tmp_path: Path
) -> None:
    path = tmp_path / "ledger.sqlite"
    check_history(lambda clock: Ledger(path, clock=clock, chain=False), HISTORIES[name])


def test_reading_a_fact_past_retracted_links_asks_one_question(tmp_path: Path) -> None:
    """a <- b <- c <- d with b and c retracted: ``get`` and ``status`` of a find d from the
    chain SQL walked, without asking ``events_around`` for b's or c's superseders."""
    clock = SetClock()
    with Ledger(tmp_path / "ledger.sqlite", clock=clock, chain=False) as ledger:
        ops = HISTORIES["space-crossing chain, deeper link retracted later"]
        ids = replay(ledger, SpecModel(clock), clock, ops)
        backend = ledger.backend
        asked: list[list[str]] = []
        real = backend.events_around

        def counted(fact_ids: object) -> list[Event]:
            asked.append(sorted(fact_ids))  # type: ignore[call-overload]
            return real(fact_ids)  # type: ignore[arg-type]

        backend.events_around = counted  # type: ignore[method-assign]
        fact = ledger.get(ids["a"])
        assert fact is not None and fact.valid_to == "2026-04-01T00:00:00.000Z"
        assert ledger.status(ids["a"]) == ("superseded", False)
        assert asked == []

"""A fact's status word in a timeline (twenty-second review, mutation testing of
``ledger/queries.py``).

``Timeline.states`` maps each fact to ``current``, ``superseded``, ``retracted`` or
``forgotten``, and a forgotten fact is retracted too (SPEC 2, "Terms": a forget cites it): a mutant that
lost the ``forgotten`` word, showing such a fact as ``retracted``, passed every test, since none
read the timeline of a forgotten fact.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_custody_state import Ledger

FACT: dict[str, Any] = {"subject": "acct:1", "predicate": "plan", "space": "org", "actor": "a"}


def test_a_timeline_names_each_facts_status_forgotten_before_retracted(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.jsonl") as ledger:
        old = ledger.assert_fact(**FACT, value="free").fact.fact_id
        new = ledger.assert_fact(**FACT, value="pro", supersedes=old).fact.fact_id
        gone = ledger.assert_fact(**{**FACT, "predicate": "email"}, value="x").fact.fact_id
        wrong = ledger.assert_fact(**{**FACT, "predicate": "name"}, value="y").fact.fact_id
        ledger.forget(fact_id=gone, actor="a", reason="erasure request")
        ledger.retract(fact_id=wrong, actor="a", reason="wrong")
        states = ledger.timeline("acct:1").states
    assert states == {old: "superseded", new: "current", gone: "forgotten", wrong: "retracted"}

"""Review 4: ``importcheck`` refuses a malformed export as ``bad_export`` (a ``LedgerError``
naming the event), whatever JSON type a fact id was given, and writes nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.ledger.model import event_from_dict


def _export() -> list[dict[str, Any]]:
    with Ledger("memory:", chain=False) as ledger:
        a = ledger.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")
        ledger.assert_fact(
            subject="s", predicate="p", value=2, space="org", actor="a", supersedes=a.fact_id
        )
        ledger.hold(fact_id=a.fact_id, actor="a", reason="r")
        return [json.loads(e.to_json()) for e in ledger.export()]


@pytest.mark.parametrize(
    ("position", "key", "bad"),
    [(3, "factId", [1]), (3, "factId", {"x": 1}), (2, "supersedes", {"x": 1})],
)
def test_a_fact_id_of_another_json_type_is_a_bad_export(position: int, key: str, bad: Any) -> None:
    lines = _export()
    lines[position - 1][key] = bad
    events = [event_from_dict(line) for line in lines]
    with Ledger("memory:") as target:
        with pytest.raises(LedgerError, match=f"^event {position}: ") as refused:
            target.import_events(events)
        assert refused.value.code == "bad_export"
        assert target.count() == 0

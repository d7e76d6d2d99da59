"""A read of several questions on a JSONL ledger sees one state of the file (``JsonlView.reading``),
even when another writer appends between its questions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_custody_state import Ledger

FACT = {"subject": "acct:1", "predicate": "plan", "space": "org", "actor": "a"}


def test_an_as_of_read_never_mixes_two_states_of_the_file(tmp_path: Path) -> None:
    """An as-of read asks for the candidate facts, then for the events around them and their
    superseders. Another writer supersedes A with C between those questions: the read must
    answer the state before (A) or after (C), not neither (A superseded by a C it never found)."""
    path = tmp_path / "l.jsonl"
    with Ledger(path) as writer, Ledger(path) as reader:
        a = writer.assert_fact(value="free", **FACT).fact_id
        b = writer.assert_fact(value="pro", supersedes=a, **FACT).fact_id
        writer.retract(fact_id=b, actor="a", reason="wrong")
        assert [f.fact_id for f in reader.as_of(subject="acct:1")] == [a]
        first_question = reader.backend.find_asserts
        landed: list[str] = []

        def then_another_write(**filters: Any) -> Any:
            answer = first_question(**filters)
            if not landed:  # another process's supersession lands between the questions
                landed.append(writer.assert_fact(value="team", supersedes=a, **FACT).fact_id)
            return answer

        reader.backend.find_asserts = then_another_write  # type: ignore[method-assign]
        seen = [f.fact_id for f in reader.as_of(subject="acct:1")]
        assert landed and seen == [a]  # the state the read began with
        del reader.backend.find_asserts
        assert [f.fact_id for f in reader.as_of(subject="acct:1")] == landed  # the next read: C

"""Rules 2.1.4 and 2.1.5 between two items of one ``assert_many`` batch (twenty-second review).

docs/decisions.md ("Bulk ingest"): an item may supersede a fact asserted earlier in the same
batch, the rules of SPEC 2.1 apply to it as to any replacement, and a refused batch appends
nothing. Mutation testing of ``ledger/rules.py`` showed two checks no test pinned down: an item
superseding a fact of its own batch with a ``validFrom`` given and a different predicate was
accepted when ``check_assert`` left out its in-batch ``check_replacement``, and one starting
before that fact (by default, at the batch's transaction time) was accepted when
``check_assert`` returned no state for it (the check at the final stamp then had nothing to
compare with). The random batches of ``test_review3_semantics_model.py`` give their items the
default ``validFrom`` and seldom supersede within a batch, so neither showed there. Each case
runs on a JSONL file and on ``memory:``; a refused batch leaves the file byte-identical.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.errors import LedgerError

FIELDS: dict[str, Any] = {"subject": "acct:1", "predicate": "plan", "space": "org", "actor": "a"}


@pytest.fixture(params=["memory", "jsonl"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ledger]:
    location = "memory:" if request.param == "memory" else str(tmp_path / "l.jsonl")
    with Ledger(location) as opened:
        opened.assert_fact(value="stored", **{**FIELDS, "subject": "other"})
        yield opened


def _item(fact_id: str, value: Any, supersedes: str | None = None, **more: Any) -> dict[str, Any]:
    return {**FIELDS, "fact_id": fact_id, "value": value, "supersedes": supersedes, **more}


def _refused(ledger: Ledger, items: list[dict[str, Any]], message: str) -> None:
    """``items`` are refused with ``message`` (the whole text); nothing is written."""
    path = Path(ledger.location) if ledger.location.endswith(".jsonl") else None
    data = path.read_bytes() if path is not None else None
    count = ledger.count()
    with pytest.raises(LedgerError) as caught:
        ledger.assert_many(items)
    assert str(caught.value) == message
    assert caught.value.code == "bad_replacement"
    assert ledger.count() == count
    assert (path.read_bytes() if path is not None else None) == data


@pytest.mark.parametrize("valid_from", ["2026-01-01T00:00:00Z", None])
def test_an_item_superseding_a_fact_of_its_batch_keeps_subject_and_predicate(
    ledger: Ledger, valid_from: str | None
) -> None:
    """Rule 2.1.5 in a batch, with a ``validFrom`` given (checked once, when the item is) and
    with the default one (checked again at the final stamp)."""
    items = [
        _item("f-1", "basic", valid_from=valid_from),
        _item("f-2", "pro", "f-1", predicate="tier", valid_from=valid_from),
    ]
    message = "a replacement must keep the subject and predicate of the fact it supersedes"
    _refused(ledger, items, f"item 1: {message}")


def test_an_item_may_not_start_before_the_fact_of_its_batch_it_supersedes(
    ledger: Ledger,
) -> None:
    """Rule 2.1.4 in a batch: item 0 starts in 2100, item 1 supersedes it with the default
    ``validFrom`` (the batch's transaction time, today), which is earlier."""
    items = [_item("f-1", "basic", valid_from="2100-01-01T00:00:00Z"), _item("f-2", "pro", "f-1")]
    _refused(ledger, items, "item 1: replacement cannot start before the fact it supersedes")


def test_a_batch_may_supersede_its_own_facts_from_the_same_instant(ledger: Ledger) -> None:
    """The accepted counterpart: a chain inside one batch, every item at the same ``validFrom``
    (equal is allowed, SPEC 2.1.4), leaves one current value."""
    at = "2026-01-01T00:00:00Z"
    ledger.assert_many(
        [
            _item("f-1", "basic", valid_from=at),
            _item("f-2", "pro", "f-1", valid_from=at),
            _item("f-3", "team", "f-2"),
        ]
    )
    assert [f.value for f in ledger.as_of(subject="acct:1")] == ["team"]

"""SPEC sections 1 and 3 read again line by line (audit, 2026-12-06): what the probes found.

SPEC 1.1 types a fact's ``subject``, ``predicate`` and ``space`` as strings and ``validFrom``
as a timestamp. A hand-edited line with ``validFrom: null`` (or a number) opened, then every
as-of read failed with a bare ``TypeError`` from the time comparison; a number for ``space``
broke ``spaces()`` (its sort) the same way. Such a line is now refused at open, naming it, as
a line of the wrong JSON types already was for ``txTime`` and a container ``subject``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import EventBackendError, Ledger

EDITS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "validFrom-null": (lambda d: d["fact"].__setitem__("validFrom", None), "validFrom"),
    "validFrom-number": (lambda d: d["fact"].__setitem__("validFrom", 5), "validFrom"),
    "space-number": (lambda d: d["fact"].__setitem__("space", 7), "space"),
    "subject-null": (lambda d: d["fact"].__setitem__("subject", None), "subject"),
    "predicate-bool": (lambda d: d["fact"].__setitem__("predicate", True), "predicate"),
    "supersedes-number": (lambda d: d.__setitem__("supersedes", 3), "supersedes"),
}


def _clock() -> datetime:
    return datetime(2026, 9, 1, tzinfo=UTC)


def _edited(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    path = tmp_path / "l.jsonl"
    with Ledger(path, chain=False, clock=_clock) as ledger:
        for subject in ("a", "b"):
            ledger.assert_fact(subject=subject, predicate="p", value=1, space="o", actor="x")
    first, second = path.read_text().splitlines()
    data = json.loads(second)
    edit(data)
    path.write_text(first + "\n" + json.dumps(data, separators=(",", ":")) + "\n")
    return path


@pytest.mark.parametrize("case", list(EDITS))
def test_a_fact_field_of_the_wrong_type_is_named_at_open(tmp_path: Path, case: str) -> None:
    edit, field = EDITS[case]
    path = _edited(tmp_path, edit)
    with pytest.raises(EventBackendError) as caught:
        Ledger(path, clock=_clock)
    message = str(caught.value)
    assert "(event 2) is not a valid event" in message, message
    assert f"{field} must be text" in message, message


def test_the_reads_of_a_well_typed_hand_written_ledger_still_work(tmp_path: Path) -> None:
    """The check refuses types only: an offset other than Z in a hand-written ``validFrom``
    and a null ``supersedes`` read as before (normalised for comparison, SPEC 1.3)."""
    path = _edited(
        tmp_path, lambda d: d["fact"].__setitem__("validFrom", "2026-09-01T02:00:00+02:00")
    )
    with Ledger(path, clock=_clock) as ledger:
        assert [f.subject for f in ledger.as_of(valid_at="2026-09-01T00:00:00.000Z")] == ["a", "b"]
        assert ledger.as_of(valid_at="2026-08-31T23:59:59.999Z") == []
        assert ledger.spaces() == ["o"]


@pytest.mark.parametrize("location", ["memory:", "l.jsonl"])
def test_spaces_are_sorted_as_javascript_sorts_them(tmp_path: Path, location: str) -> None:
    """SPEC 2.9: ``spaces()`` sorted, as the original's ``Array.sort`` sorts: by UTF-16 code
    units, so a space holding a character past U+FFFF (a surrogate pair, 0xD800..0xDBFF first)
    comes before one starting at U+E000..U+FFFF, where code-point order puts it after."""
    names = ["team:\ufb01", "team:\U0001f600", "team:a", "org"]
    where = location if location == "memory:" else tmp_path / location
    with Ledger(where) as ledger:
        for name in names:
            ledger.assert_fact(subject="s", predicate="p", value=1, space=name, actor="x")
        assert ledger.spaces() == ["org", "team:a", "team:\U0001f600", "team:\ufb01"]
        assert sorted(names) != ledger.spaces()  # code-point order differs here

"""A hand-edited JSONL line whose fields have the wrong JSON type (a number for ``txTime``, a
list for ``factId``) is refused at open with the line named, like a line that is not JSON:
before, the index failed part-way with a ``TypeError`` and the command line blamed the
location ("check the location, e.g. postgresql://..."). As the last line, without its newline,
such an event is refused too, never cut off as a torn write."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import EventBackendError, Ledger
from agent_custody_state.cli import main

EDITS: dict[str, Callable[[dict[str, Any]], None]] = {
    "txTime": lambda d: d.__setitem__("txTime", 5),
    "factId": lambda d: d["fact"].__setitem__("factId", ["x"]),
    "subject": lambda d: d["fact"].__setitem__("subject", {"a": 1}),
    "supersedes": lambda d: d.__setitem__("supersedes", ["y"]),
}


def _ledger(tmp_path: Path, edit: Callable[[dict[str, Any]], None], newline: bool) -> Path:
    path = tmp_path / "l.jsonl"
    with Ledger(path, chain=False) as ledger:
        for subject in ("a", "b"):
            ledger.assert_fact(subject=subject, predicate="p", value=1, space="o", actor="x")
    first, second = path.read_text().splitlines()
    data = json.loads(second)
    edit(data)
    path.write_text(
        first + "\n" + json.dumps(data, separators=(",", ":")) + ("\n" if newline else "")
    )
    return path


@pytest.mark.parametrize("newline", [True, False], ids=["line", "last-line"])
@pytest.mark.parametrize("field", list(EDITS))
def test_a_field_of_the_wrong_type_is_named_at_open(
    tmp_path: Path, field: str, newline: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _ledger(tmp_path, EDITS[field], newline)
    before, files = path.read_bytes(), sorted(tmp_path.iterdir())
    with pytest.raises(EventBackendError) as caught:
        Ledger(path)
    message = str(caught.value)
    assert "is not a valid event" in message and f"{field} must be text" in message, message
    assert ("(event 2)" in message) if newline else ("the last line" in message)
    assert main(["facts", "--ledger", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: the ") and "postgresql://" not in err, err
    assert path.read_bytes() == before
    assert sorted(tmp_path.iterdir()) == files

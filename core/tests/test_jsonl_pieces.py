"""A JSONL ledger is read in pieces (``jsonl.READ_CHUNK`` bytes cut after their last newline),
so opening a large file does not hold it whole twice. Whatever the piece size, including pieces
smaller than one line, the file reads exactly as one piece reads it: the same events at the same
offsets, the same torn-tail repair, the same accepted final line without its newline, and the
same error naming a corrupt line's byte offset."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_custody_state import EventBackendError, Ledger
from agent_custody_state.backends import jsonl
from agent_custody_state.backends.jsonl import JsonlBackend

PIECES = [1, 13, 200, 1 << 20]


def _ledger(path: Path) -> list[str]:
    """A ledger with short and long lines (a value longer than most pieces, non-ASCII)."""
    with Ledger(path) as ledger:
        first = ledger.assert_fact(
            subject="s", predicate="p", value="é" * 300, space="o", actor="a"
        )
        ledger.assert_fact(
            subject="s", predicate="p", value={"n": 1}, space="o", actor="a",
            supersedes=first.fact_id,
        )  # fmt: skip
        ledger.hold(fact_id=first.fact_id, actor="legal", reason="r")
    return path.read_text(encoding="utf-8").splitlines()


def _read(path: Path) -> tuple[list[str], list[str]]:
    with Ledger(path) as ledger:
        backend = ledger.backend
        assert isinstance(backend, JsonlBackend)
        return [e.to_json() for e in backend.iter_events()], list(backend.repairs)


@pytest.fixture(params=PIECES)
def written(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, list[str]]:
    """The ledger and its lines, then read in pieces of ``request.param`` bytes."""
    path = tmp_path / "l.jsonl"
    lines = _ledger(path)
    monkeypatch.setattr(jsonl, "READ_CHUNK", request.param)
    return path, lines


def test_pieces_read_as_the_whole_file(written: tuple[Path, list[str]]) -> None:
    path, lines = written
    events, repairs = _read(path)
    assert events == lines and repairs == []


def test_a_torn_tail_is_cut_the_same_way(written: tuple[Path, list[str]]) -> None:
    path, lines = written
    size = path.stat().st_size
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(lines[0][:150])  # torn inside a multi-byte character's run
    events, repairs = _read(path)
    assert events == lines
    assert len(repairs) == 1 and "torn final line" in repairs[0]
    assert path.stat().st_size == size


def test_a_last_line_without_its_newline_is_read(written: tuple[Path, list[str]]) -> None:
    path, lines = written
    path.write_text("\n".join(lines), encoding="utf-8")
    events, repairs = _read(path)
    assert events == lines and repairs == []


def test_a_corrupt_line_is_named_at_its_offset(written: tuple[Path, list[str]]) -> None:
    path, lines = written
    lines[1] = lines[1][:40]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    offset = len(lines[0].encode()) + 1
    with pytest.raises(EventBackendError, match=f"the line at byte {offset} \\(event 2\\)"):
        JsonlBackend(path)

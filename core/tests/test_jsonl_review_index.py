"""Review of the JSONL backend's in-memory view against the file (docs/reliability.md): a line
that is not an event met by a running reader, a section that fails after its forget, a forget
interrupted half-way, and a forget that takes the file past the size limit."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import EventBackendError, Ledger
from agent_custody_state.backends.jsonl import JsonlBackend


def _assert(ledger: Ledger, value: Any, predicate: str = "p") -> str:
    event = ledger.assert_fact(subject="s", predicate=predicate, value=value, space="x", actor="a")
    return event.fact.fact_id


def _count_elsewhere(path: Path) -> int:
    """The event count another process reads from the file."""
    code = "import sys\nfrom agent_custody_state import Ledger\n"
    code += "with Ledger(sys.argv[1], read_only=True) as l: print(l.count())"
    run = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return int(run.stdout)


def test_a_bad_line_met_by_a_running_reader_never_duplicates_the_lines_before_it(
    tmp_path: Path,
) -> None:
    """A reader ingested the new lines before a line that is not an event, raised, and at the
    next look read from the same place again: the good lines were added once per look (the
    error's event number grew each time), and once the bad line was cut off the reader served
    every one of them several times."""
    path = tmp_path / "l.jsonl"
    reader = JsonlBackend(path)
    try:
        with Ledger(path) as writer:
            _assert(writer, 1)
        assert reader.count() == 1
        with Ledger(path) as writer:
            _assert(writer, 2, "q")
        good = path.stat().st_size
        with open(path, "ab") as fh:  # a newer writer's kind, or a hand edit
            fh.write(b'{"eventId":"x","kind":"unheard-of","txTime":"2026-01-01T00:00:00.000Z"}\n')
        messages = set()
        for _ in range(3):
            with pytest.raises(EventBackendError, match="is not a valid event") as info:
                reader.count()
            messages.add(str(info.value))
        assert len(messages) == 1, messages  # the same line, the same event number each time
        assert "(event 3)" in messages.pop()
        os.truncate(path, good)  # the operator cuts the bad line off
        assert reader.count() == 2
        assert [e.kind for e in reader.iter_events()] == ["assert", "assert"]
    finally:
        reader.close()


def test_a_section_failing_after_its_forget_keeps_the_forget_in_view(tmp_path: Path) -> None:
    """A forget is durable the moment its file is renamed in place; a later step of the same
    section that fails rolled the index back to the section's start, dropping the forget event
    (and leaving the erased asserts): this process then disagreed with the file, and with
    every other process, until the file changed again."""
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        fact_id = _assert(ledger, "secret")
        _assert(ledger, "kept", "q")
        with pytest.raises(RuntimeError, match="a later step"):
            with ledger.backend.transaction():
                ledger.forget(fact_id=fact_id, actor="dpo", reason="erasure")
                raise RuntimeError("a later step of the section failed")
        assert _count_elsewhere(path) == 3
        assert ledger.count() == 3
        assert [e.kind for e in ledger.history(fact_id)] == ["assert", "forget"]
        # And the next write, in this process, leaves a file every process reads alike.
        _assert(ledger, "after", "r")
        assert ledger.count() == _count_elsewhere(path) == 4


def test_a_forget_interrupted_before_its_rename_leaves_the_value_in_view(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only an ``OSError`` reset the index, which a forget rewrites before the file: an
    interrupt (``KeyboardInterrupt``, any other exception) while the rewrite was written left
    this process serving the fact as forgotten, while the file, unchanged, still held it."""
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        fact_id = _assert(ledger, "secret")

        def interrupted(fd: int) -> None:
            raise KeyboardInterrupt

        monkeypatch.setattr(os, "fsync", interrupted)
        with pytest.raises(KeyboardInterrupt):
            ledger.forget(fact_id=fact_id, actor="dpo", reason="erasure")
        monkeypatch.undo()
        got = ledger.get(fact_id)
        assert got is not None and got.value == "secret"
        assert [e.kind for e in ledger.history(fact_id)] == ["assert"]
        assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
        ledger.forget(fact_id=fact_id, actor="dpo", reason="erasure")  # and it can be retried
        assert _count_elsewhere(path) == ledger.count() == 2


def test_a_forget_that_takes_the_file_past_the_limit_warns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Appends warned when they took the file past the open limit; a forget (which grows every
    assert of the fact and adds a line) did not, so the next open's refusal came unannounced."""
    path = tmp_path / "l.jsonl"
    limit_mb = 4096 / 2**20
    with Ledger(path, max_mb=limit_mb) as ledger:
        fact_id = _assert(ledger, "")
        overhead = path.stat().st_size
        _assert(ledger, "v" * (4000 - 2 * overhead), "q")  # the file is some 4000 bytes now
        assert 3900 < path.stat().st_size <= 4096
        with caplog.at_level(logging.WARNING):
            ledger.forget(fact_id=fact_id, actor="dpo", reason="erasure")
    assert path.stat().st_size > 4096
    assert "grown past the JSONL backend's limit" in caplog.text
    with pytest.raises(EventBackendError, match="beyond the JSONL backend's limit"):
        Ledger(path, max_mb=limit_mb)

"""Forget leaves no bytes of the value in the ledger's files (SPEC 2.5): the file, -wal, -shm."""

from __future__ import annotations

import uuid
from pathlib import Path

from agent_custody_state import Ledger


def _files(path: Path) -> list[Path]:
    return [p for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists()]


def _holding(path: Path, needle: bytes) -> list[str]:
    return [p.name for p in _files(path) if needle in p.read_bytes()]


def test_forget_erases_value_from_file_and_wal(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    marker = f"secret-{uuid.uuid4().hex}"
    big = f"big-{uuid.uuid4().hex}" * 400  # ~16 KB: lives on overflow pages
    with Ledger(path) as ledger:
        for i in range(50):  # neighbours on the same pages must survive intact
            ledger.assert_fact(
                subject=f"n{i}", predicate="p", value=f"keep-{i}", space="org", actor="a"
            )
        a = ledger.assert_fact(
            subject="dana", predicate="email", value=marker, space="user:d", actor="a"
        )
        b = ledger.assert_fact(
            subject="dana",
            predicate="email",
            value={"v": marker},
            space="user:d",
            actor="a",
            supersedes=a.fact_id,
        )
        c = ledger.assert_fact(
            subject="dana", predicate="notes", value=big, space="user:d", actor="a"
        )
        ledger.compact()  # the value is in the main file too, not only in the WAL
        for needle in (marker.encode(), big[:64].encode()):
            assert _holding(path, needle), "the test must see the value before the forget"
        # The WAL is still open (the ledger is open); scan while it is.
        for fact in (a, b, c):
            ledger.forget(fact_id=fact.fact_id, actor="dpo", reason="erasure")
        assert Path(f"{path}-wal").exists()
        assert _holding(path, marker.encode()) == []
        assert _holding(path, big[:64].encode()) == []
        assert _holding(path, big[-64:].encode()) == []
        assert all(ledger.get(f.fact_id).value is None for f in (a, b, c))  # type: ignore[union-attr]
        assert [f.value for f in ledger.as_of(subject="n7")] == ["keep-7"]
    assert _holding(path, marker.encode()) == []


def test_sweep_erases_every_value(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    markers = [f"old-{uuid.uuid4().hex}" for _ in range(5)]
    with Ledger(path) as ledger:
        for i, marker in enumerate(markers):
            ledger.assert_fact(
                subject=f"s{i}", predicate="p", value=marker, space="team:x", actor="a"
            )
        ledger.compact()
        assert all(_holding(path, m.encode()) for m in markers)
        result = ledger.sweep(before="2999-01-01T00:00:00Z", actor="retention", reason="P30D")
        assert len(result.forgotten) == 5
        for marker in markers:
            assert _holding(path, marker.encode()) == []


def test_second_process_does_not_keep_value_alive(tmp_path: Path) -> None:
    """Another open connection (idle between calls) does not stop the WAL truncation."""
    path = tmp_path / "l.sqlite"
    marker = f"shared-{uuid.uuid4().hex}"
    with Ledger(path) as writer, Ledger(path) as reader:
        a = writer.assert_fact(subject="s", predicate="p", value=marker, space="org", actor="a")
        assert [f.value for f in reader.as_of(subject="s")] == [marker]
        writer.forget(fact_id=a.fact_id, actor="dpo", reason="erasure")
        assert _holding(path, marker.encode()) == []
        assert [f.value for f in reader.as_of(subject="s")] == []


def _forget_then_die(path: str, fact_id: str) -> None:
    """Forget, and die (as SIGKILL would) after the commit, before the WAL is truncated."""
    import os

    from agent_custody_state_events_sqlite.store import SqliteBackend

    def die(self: object) -> None:
        os._exit(9)

    SqliteBackend.compact = die  # type: ignore[method-assign]
    with Ledger(path) as ledger:
        ledger.forget(fact_id=fact_id, actor="dpo", reason="erasure")


def test_reopen_finishes_the_erasure_of_a_crashed_forget(tmp_path: Path) -> None:
    """A forget that died between its commit and the WAL truncation left the value in the WAL
    and in the old page of the main file; opening the ledger again must erase them, not wait
    for the next forget."""
    import multiprocessing

    path = tmp_path / "l.sqlite"
    marker = f"secret-{uuid.uuid4().hex}"
    with Ledger(path) as ledger:
        fact = ledger.assert_fact(
            subject="dana", predicate="email", value=marker, space="user:d", actor="a"
        )
        ledger.compact()  # the value is in the main file
    proc = multiprocessing.get_context("spawn").Process(
        target=_forget_then_die, args=(str(path), fact.fact_id)
    )
    proc.start()
    proc.join(60)
    assert proc.exitcode == 9
    assert _holding(path, marker.encode()), "the crash must leave the value behind"
    with Ledger(path) as ledger:  # a server restarting on the file, and staying up
        got = ledger.get(fact.fact_id)
        assert got is not None and got.value is None
        assert _holding(path, marker.encode()) == []

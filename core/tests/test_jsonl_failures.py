"""JSONL when writes fail: partial lines, failed fsyncs and forgets, crashed batches, a cut-off that
cannot be made; the ledger fails closed and never serves what it did not acknowledge."""

from __future__ import annotations

import errno
import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import EventBackendError, Ledger
from agent_custody_state.backends.jsonl import JsonlBackend


def test_failed_write_leaves_no_partial_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        ledger.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")
        before = path.read_bytes()
        real_write = os.write

        def short_then_enospc(fd: int, data: Any) -> int:
            if len(data) > 20:
                real_write(fd, bytes(data[:20]))  # a partial write, then the disk is full
                raise OSError(errno.ENOSPC, "No space left on device")
            return real_write(fd, data)

        monkeypatch.setattr(os, "write", short_then_enospc)
        with pytest.raises(EventBackendError, match="No space left on device; nothing was written"):
            ledger.assert_fact(subject="s", predicate="p", value=2, space="org", actor="a")
        monkeypatch.setattr(os, "write", real_write)
        assert path.read_bytes() == before
        assert ledger.count() == 1
        ledger.assert_fact(subject="s", predicate="p", value=3, space="org", actor="a")
        assert ledger.count() == 2


def test_failed_fsync_fails_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        ledger.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")
        before = path.read_bytes()

        def bad_fsync(fd: int) -> None:
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(os, "fsync", bad_fsync)
        with pytest.raises(EventBackendError, match="Input/output error"):
            ledger.assert_fact(subject="s", predicate="p", value=2, space="org", actor="a")
        monkeypatch.undo()
        assert path.read_bytes() == before and ledger.count() == 1


def test_failed_forget_leaves_ledger_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        fact = ledger.assert_fact(
            subject="s", predicate="p", value="secret", space="org", actor="a"
        )
        before = path.read_bytes()

        def bad_replace(src: Any, dst: Any) -> None:
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(os, "replace", bad_replace)
        with pytest.raises(EventBackendError, match="the ledger is unchanged"):
            ledger.forget(fact_id=fact.fact_id, actor="a", reason="r")
        monkeypatch.undo()
        assert path.read_bytes() == before
        got = ledger.get(fact.fact_id)
        assert got is not None and got.value == "secret"
        assert not list(tmp_path.glob(".*.tmp"))


def test_forget_removes_temporaries_of_a_crashed_forget(tmp_path: Path) -> None:
    """A forget killed before its rename leaves a rewrite temporary with other facts' values;
    the next forget must delete it, or a value forgotten later survives in that copy."""
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        first = ledger.assert_fact(subject="s", predicate="p", value="one", space="org", actor="a")
        later = ledger.assert_fact(
            subject="t", predicate="p", value="secret-later", space="org", actor="a"
        )
        # What a forget of `first` killed between writing and renaming leaves behind.
        stale = tmp_path / ".l.jsonl.99999.forget.tmp"
        stale.write_bytes(path.read_bytes())
        ledger.forget(fact_id=later.fact_id, actor="dpo", reason="erasure")
        assert not stale.exists()
        assert all(b"secret-later" not in p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
        assert ledger.get(first.fact_id) is not None


def _crash_mid_batch(path: str) -> None:
    """Assert a batch of three, dying (as SIGKILL would) once the first line is on disk."""
    real_write = os.write

    def write_first_line_then_die(fd: int, data: Any) -> int:
        data = bytes(data)
        if data.count(b"\n") > 1:  # the batch itself, not the journal
            real_write(fd, data[: data.index(b"\n") + 1])
            os._exit(9)
        return real_write(fd, data)

    with Ledger(path) as ledger:
        os.write = write_first_line_then_die  # type: ignore[assignment]
        ledger.assert_many(
            [
                {"subject": f"b{i}", "predicate": "p", "value": i, "space": "org", "actor": "a"}
                for i in range(3)
            ]
        )


def test_batch_cut_at_a_line_boundary_is_rolled_back(tmp_path: Path) -> None:
    """A crash between two lines of a batch leaves no torn line; the batch journal still shows
    the batch incomplete, and it is rolled back: all of a batch, or none of it."""
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        ledger.assert_fact(subject="s", predicate="p", value=0, space="org", actor="a")
    reader = JsonlBackend(path)  # open before the crash: it only reads (shared lock) afterwards
    proc = multiprocessing.get_context("spawn").Process(target=_crash_mid_batch, args=(str(path),))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 9
    assert len(path.read_text().splitlines()) == 2  # one batch line made it to the file
    assert reader.count() == 1  # a reader stops where the unfinished batch starts
    with Ledger(path) as ledger:
        assert ledger.count() == 1
        repairs = ledger.backend.repairs  # type: ignore[attr-defined]
        assert "batch of events was cut short" in repairs[0]
        ledger.assert_many(
            [{"subject": "c", "predicate": "p", "value": 1, "space": "org", "actor": "a"}] * 2
        )
        assert ledger.count() == 3
    assert not (tmp_path / "l.jsonl.batch").exists()
    reader.close()


def test_failed_append_that_cannot_be_truncated_is_never_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fsync fails and so does the truncation that should remove the rejected line (a failing
    disk): the caller was told nothing was written, so the ledger must not serve that line
    later, and its next write cuts it off."""
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        ledger.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")

        def eio(*args: Any) -> None:
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(os, "fsync", eio)
        monkeypatch.setattr(os, "ftruncate", eio)
        with pytest.raises(EventBackendError, match="nothing was written"):
            ledger.assert_fact(subject="s", predicate="p", value="rejected", space="org", actor="a")
        monkeypatch.undo()
        assert b"rejected" in path.read_bytes()  # the disk kept it
        assert [f.value for f in ledger.facts()] == [1]  # but it is never served
        ledger.assert_fact(subject="s", predicate="p", value=3, space="org", actor="a")
        assert [f.value for f in ledger.facts()] == [1, 3]
    assert b"rejected" not in path.read_bytes()
    with Ledger(path) as ledger:
        assert ledger.count() == 2


def test_forget_whose_directory_sync_fails_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rename happened, the directory fsync failed: the error must not claim the ledger is
    unchanged, and the ledger's view must match the file (the forget is in it)."""
    from agent_custody_state.backends import jsonl

    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        fact = ledger.assert_fact(
            subject="s", predicate="p", value="secret", space="org", actor="a"
        )

        def eio(path: Path) -> None:
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(jsonl, "_fsync_dir", eio)
        with pytest.raises(EventBackendError, match="may not survive a power loss"):
            ledger.forget(fact_id=fact.fact_id, actor="a", reason="r")
        monkeypatch.undo()
        got = ledger.get(fact.fact_id)
        assert got is not None and got.value is None
        assert [e.kind for e in ledger.export()] == ["assert", "forget"]
    assert b"secret" not in path.read_bytes()

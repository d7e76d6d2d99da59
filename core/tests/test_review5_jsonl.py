"""Fifth review of the JSONL backend (docs/reliability.md): two threads sharing one ledger, one
file opened through a symlink and by its own name, a child forked after the open, and the bytes
of a failed append met again after another writer."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import EventBackendError, Ledger
from agent_custody_state.backends import jsonl
from agent_custody_state.backends.jsonl import JsonlBackend
from agent_custody_state.backends.jsonl_files import replace_file as replace_file_as_written
from agent_custody_state.backends.jsonl_lines import stored_lines
from agent_custody_state.ledger.verify import verify_lines


def _assert(ledger: Ledger, value: Any, space: str = "x") -> str:
    event = ledger.assert_fact(subject="s", predicate="p", value=value, space=space, actor="a")
    return event.fact.fact_id


def test_a_thread_reading_while_another_writes_never_fails(tmp_path: Path) -> None:
    """``spaces`` walked the view's dicts outside the instance lock: a thread asserting facts in
    new spaces made a reading thread fail with "dictionary changed size during iteration"."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    errors: list[BaseException] = []
    stop = threading.Event()
    try:
        with Ledger(tmp_path / "l.jsonl") as ledger:
            ledger.assert_many(
                {"subject": "s", "predicate": "p", "value": i, "space": f"old{i}", "actor": "a"}
                for i in range(3000)
            )

            def read() -> None:
                while not stop.is_set():
                    try:
                        ledger.spaces()
                        ledger.key_values("space")
                    except BaseException as exc:  # reported below
                        errors.append(exc)
                        return

            readers = [threading.Thread(target=read) for _ in range(2)]
            for thread in readers:
                thread.start()
            try:
                for i in range(300):
                    _assert(ledger, i, space=f"new{i}")
                    if errors:
                        break
            finally:
                stop.set()
                for thread in readers:
                    thread.join()
    finally:
        sys.setswitchinterval(before)
    assert errors == []


def test_a_thread_never_reads_another_threads_write_before_it_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read caught up under the lock, then answered without it: a write section another thread
    opened in between showed its events before their fsync, and they were gone when the write
    failed. The gap is widened here (the reader pauses after catching up)."""
    ledger = Ledger(tmp_path / "l.jsonl")
    _assert(ledger, 1)
    caught_up, in_write, read_done = threading.Event(), threading.Event(), threading.Event()
    original_refresh = JsonlBackend.refresh

    def refresh(self: JsonlBackend) -> None:
        original_refresh(self)
        if threading.current_thread().name == "reader":
            caught_up.set()
            in_write.wait(1)  # the writer gets in here if nothing holds it out

    def failing_write(fd: int, data: bytes) -> None:
        in_write.set()
        read_done.wait(5)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(JsonlBackend, "refresh", refresh)
    monkeypatch.setattr(jsonl, "write_all", failing_write)
    seen: list[int] = []

    def read() -> None:
        try:
            seen.append(ledger.count())
        finally:
            read_done.set()

    reader = threading.Thread(target=read, name="reader")
    reader.start()
    assert caught_up.wait(5)
    with pytest.raises(EventBackendError, match="nothing was written"):
        _assert(ledger, 2)
    reader.join()
    monkeypatch.undo()
    assert ledger.count() == 1
    assert seen == [1]  # never the fact whose write failed
    ledger.close()


def test_a_symlink_and_the_file_it_names_share_one_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock sat beside the path as given: a writer through a symlink and one through the
    file's own name locked two different files, so an append made while the other's forget was
    rewriting the file was acknowledged and then lost in the rename. (One process here, the
    append hooked into the forget; two processes race the same way.)"""
    real, link = tmp_path / "ledger-2026.jsonl", tmp_path / "current.jsonl"
    with Ledger(real) as ledger:
        fact_id = _assert(ledger, "secret")
    link.symlink_to(real.name)
    through_link = JsonlBackend(link)
    with through_link.transaction():
        assert _excluded(real)  # a writer opening the file by its own name waits
    through_link.close()

    by_link, by_name = Ledger(link), Ledger(real)
    original = replace_file_as_written
    appended: list[str] = []

    def replace_file(path: Path, data: bytes) -> Path:
        if not appended:  # another writer, while the forget holds the lock (it waits, if shared)
            worker = threading.Thread(target=lambda: appended.append(_assert(by_name, "b")))
            worker.start()
            worker.join(1)
            appended.append("waited" if worker.is_alive() else "ran")
        return original(path, data)

    monkeypatch.setattr(jsonl, "replace_file", replace_file)
    by_link.forget(fact_id=fact_id, actor="dpo", reason="erasure")
    while len(appended) < 2:  # the other writer's append, once the forget let go of the lock
        threading.Event().wait(0.01)
    by_link.close()
    by_name.close()
    with Ledger(real, read_only=True) as ledger:
        assert [e.kind for e in ledger.export()] == ["assert", "forget", "assert"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "current.jsonl",
        "ledger-2026.jsonl",
        "ledger-2026.jsonl.lock",
    ]


FORKED = """
import json, os, sys, time
from agent_custody_state import Ledger

path = sys.argv[1]
ledger = Ledger(path)
ledger.assert_fact(subject="s", predicate="p", value="first", space="x", actor="a")
held, told = os.pipe()
child = os.fork()
if child == 0:
    os.read(held, 1)  # the parent is inside its write section now
    ledger.assert_fact(subject="s", predicate="p", value="child", space="x", actor="a")
    ledger.close()
    os._exit(0)
with ledger.backend.transaction():
    os.write(told, b"x")
    time.sleep(1)  # the child must wait for the lock meanwhile
    ledger.assert_fact(subject="s", predicate="p", value="parent", space="x", actor="a")
os.waitpid(child, 0)
ledger.close()
lines = [json.loads(line) for line in open(path, encoding="utf-8")]
print(json.dumps([[e["fact"]["value"], e["chain"]["seq"]] for e in lines]))
"""


def test_a_child_forked_after_the_open_takes_the_lock_for_itself(tmp_path: Path) -> None:
    """A child forked after the open shared the parent's open lock file, so ``flock`` excluded
    neither from the other: the child appended inside the parent's write section, and the two
    events took one place in the chain (seq 2 twice)."""
    run = subprocess.run(
        [sys.executable, "-c", FORKED, str(tmp_path / "l.jsonl")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(run.stdout) == [["first", 1], ["parent", 2], ["child", 3]]


def test_a_symlink_naming_no_file_yet_creates_the_file_it_names(tmp_path: Path) -> None:
    """A link made ahead of its file (a rotation prepared in advance) opened, but its first
    write failed with a bare ``FileNotFoundError``: ``O_EXCL`` never creates through a link."""
    link = tmp_path / "current.jsonl"
    link.symlink_to("ledger-2027.jsonl")
    with Ledger(link) as ledger:
        _assert(ledger, "v")
    assert link.is_symlink()
    real = tmp_path / "ledger-2027.jsonl"
    assert oct(real.stat().st_mode & 0o777) == oct(0o600)
    with Ledger(real, read_only=True) as ledger:
        assert [f.value for f in ledger.facts()] == ["v"]


@pytest.mark.parametrize("then", ["appends", "forgets"])
def test_bytes_a_failed_append_left_are_never_cut_after_another_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, then: str
) -> None:
    """A failed append whose truncation failed too (a failing disk) remembered only the offset
    of its bytes and cut the file there before its next write, whatever had happened since:
    another writer had meanwhile rolled them back and appended an event (acknowledged, then cut
    off), or forgotten a fact (the rewritten file was cut, the forget event with it)."""
    path = tmp_path / "l.jsonl"
    failing, other = Ledger(path), Ledger(path)  # the other: as another process, its own lock
    fact_id = _assert(failing, "first")

    def eio(*args: Any) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", eio)
    monkeypatch.setattr(os, "ftruncate", eio)
    with pytest.raises(EventBackendError, match="nothing was written"):
        _assert(failing, "rejected")
    monkeypatch.undo()
    assert b"rejected" in path.read_bytes()  # the disk kept it
    _assert(other, "acknowledged")
    if then == "forgets":
        other.forget(fact_id=fact_id, actor="dpo", reason="erasure")
    _assert(failing, "later")
    failing.close()
    other.close()
    with Ledger(path, read_only=True) as ledger:
        values = [f.value for f in ledger.facts()]
        kinds = [e.kind for e in ledger.export()]
    first = None if then == "forgets" else "first"
    assert values == [first, "acknowledged", "later"]
    assert kinds == ["assert", "assert", *(["forget"] if then == "forgets" else []), "assert"]


def _excluded(path: Path) -> bool:
    """Whether another process's writer would wait now (its own open of the lock file)."""
    fd = os.open(f"{path}.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_reading_the_stored_lines_never_lets_go_of_a_write_section(tmp_path: Path) -> None:
    """``stored_events`` (what verify reads) took a shared ``flock`` on the lock file this
    process's write sections lock too, without the instance lock: from another thread, or inside
    the section itself, it turned the section's exclusive lock into a shared one and its unlock
    released it, so another process could write inside the section."""
    path = tmp_path / "l.jsonl"
    backend = JsonlBackend(path)
    with backend.transaction():
        list(backend.stored_events())  # this thread's own section
        assert _excluded(path)
    entered, leave = threading.Event(), threading.Event()

    def section() -> None:
        with backend.transaction():
            entered.set()
            leave.wait(5)

    writer = threading.Thread(target=section)
    writer.start()
    assert entered.wait(5)
    lines: list[bytes] = []
    verifier = threading.Thread(target=lambda: lines.extend(backend.stored_events()))
    verifier.start()
    verifier.join(0.3)  # it waits for the section, or (before) took the lock file meanwhile
    try:
        assert _excluded(path)
    finally:
        leave.set()
        writer.join()
        verifier.join()
        backend.close()
    assert lines == []


def test_a_section_going_on_after_a_failed_forget_reads_the_file_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed forget drops the view, to read it again at the next look; but inside a write
    section nothing looked again, so when the caller caught the error and went on, the next
    forget found no such fact and the next assert was chained as the first event of the ledger
    (a genesis record in the middle: the file no longer verified)."""
    path = tmp_path / "l.jsonl"
    ledger = Ledger(path)
    first, second = _assert(ledger, "A"), _assert(ledger, "B")

    def no_space(path: Path, data: bytes) -> Path:
        raise OSError(errno.ENOSPC, "No space left on device")

    with ledger.backend.transaction():
        with monkeypatch.context() as patch:
            patch.setattr(jsonl, "replace_file", no_space)
            with pytest.raises(EventBackendError, match="the ledger is unchanged"):
                ledger.forget(fact_id=first, actor="dpo", reason="erasure")
        _assert(ledger, "C")
        ledger.forget(fact_id=second, actor="dpo", reason="erasure")
    ledger.close()
    report = verify_lines(stored_lines(path, None))
    assert report.ok, report.problems
    with Ledger(path, read_only=True) as reader:
        assert [f.value for f in reader.facts()] == ["A", None, "C"]

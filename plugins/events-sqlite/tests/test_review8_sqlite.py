"""Eighth review of the SQLite backend under several processes and crashes: a read-only reader
while another process forgets, a compaction that waits for a long reader without locking writers
out, the last event's time read once per write and never stale, a hot journal another program
left, and errors that name the file or the timeout behind SQLite's words."""

from __future__ import annotations

import logging
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main
from agent_custody_state.plugin import EventBackendError
from agent_custody_state_events_sqlite.store import SqliteBackend

FACT = {"subject": "s", "predicate": "p", "space": "o", "actor": "a"}

#: A writer in another process: opens the ledger, says "open", forgets the fact given when told
#: (a line on stdin), says "forgot", and closes when told again.
WRITER = """
import sys
from agent_custody_state import Ledger
ledger = Ledger(sys.argv[1])
print("open", flush=True)
sys.stdin.readline()
ledger.forget(fact_id=sys.argv[2], actor="a", reason="asked")
print("forgot", flush=True)
sys.stdin.readline()
ledger.close()
"""


def _child(script: str, *args: str) -> subprocess.Popen[str]:
    """``script`` in another Python process, its stdin and stdout piped (text)."""
    pipe = subprocess.PIPE
    return subprocess.Popen(
        [sys.executable, "-c", script, *args], stdin=pipe, stdout=pipe, text=True
    )


def _secret_ledger(folder: Path) -> tuple[Path, str]:
    path = folder / "ledger.sqlite"
    with Ledger(path) as writer:
        fact_id = writer.assert_fact(**FACT, value="SECRET").fact_id
    assert sorted(p.name for p in folder.iterdir()) == ["ledger.sqlite"]  # no -wal: immutable
    return path, fact_id


def _step(writer: subprocess.Popen[str], expect: str) -> None:
    assert writer.stdin is not None and writer.stdout is not None
    writer.stdin.write("\n")
    writer.stdin.flush()
    assert writer.stdout.readline().strip() == expect


def test_a_read_only_reader_never_serves_a_value_another_process_forgot(tmp_path: Path) -> None:
    """A read-only open of a file no writer had open reads it ``immutable=1``, which trusts its
    page cache and the file for ever: the value forgotten (and compacted out of the file) by
    another process was still returned, while the writer was open and after it closed."""
    path, fact_id = _secret_ledger(tmp_path)
    with Ledger(path, read_only=True) as reader:
        fact = reader.get(fact_id)
        assert fact is not None and fact.value == "SECRET"
        writer = _child(WRITER, str(path), fact_id)
        try:
            assert writer.stdout is not None and writer.stdout.readline().strip() == "open"
            _step(writer, "forgot")  # committed and compacted (WAL truncated into the file)
            fact = reader.get(fact_id)
            assert fact is not None and fact.value is None  # the forget is seen at once
            writer.stdin.write("\n")  # type: ignore[union-attr]
            writer.stdin.flush()  # type: ignore[union-attr]
            assert writer.wait(timeout=30) == 0
        finally:
            writer.kill()
        fact = reader.get(fact_id)
        assert fact is not None and fact.value is None
        assert [e.kind for e in reader.history(fact_id)] == ["assert", "forget"]


def test_a_read_only_reader_sees_a_writer_that_came_and_went(tmp_path: Path) -> None:
    """The writer opened, forgot and closed between two reads (its -wal gone again): the file
    changed under the immutable connection, whose cached pages held the value."""
    path, fact_id = _secret_ledger(tmp_path)
    with Ledger(path, read_only=True) as reader:
        assert reader.count() == 1
        fact = reader.get(fact_id)
        assert fact is not None and fact.value == "SECRET"
        with Ledger(path) as writer:  # another connection: as another process would
            writer.forget(fact_id=fact_id, actor="a", reason="asked")
            writer.assert_fact(**{**FACT, "subject": "t"}, value="later")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.sqlite"]
        fact = reader.get(fact_id)
        assert fact is not None and fact.value is None
        assert reader.count() == 3
        assert sorted(str(f.value) for f in reader.as_of()) == ["later"]


#: A reader in another process holding one read snapshot until its stdin closes.
LONG_READER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN")
db.execute("SELECT count(*) FROM events").fetchone()
print("holding", flush=True)
sys.stdin.read()
"""


def test_a_compaction_waiting_for_a_long_reader_does_not_lock_writers_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A ``TRUNCATE`` checkpoint holds the write lock while it waits for readers: with another
    process's snapshot open, a forget's compaction locked every writer out for three busy
    timeouts, and their writes failed with "database is locked" after their own."""
    path = tmp_path / "ledger.sqlite"
    ledger = Ledger(SqliteBackend(path, busy_timeout=1.5))
    fact_id = ledger.assert_fact(**FACT, value="SECRET").fact_id
    reader = _child(LONG_READER, str(path))
    other = Ledger(SqliteBackend(path, busy_timeout=0.5))
    try:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "holding"
        done = threading.Event()
        errors: list[BaseException] = []

        def forget() -> None:
            try:
                ledger.forget(fact_id=fact_id, actor="a", reason="asked")
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)
            finally:
                done.set()

        with caplog.at_level(logging.WARNING):
            thread = threading.Thread(target=forget)
            thread.start()
            written = 0
            while not done.is_set():  # writes all along the forget's compaction
                other.assert_fact(**{**FACT, "subject": f"w{written}"}, value="v")
                written += 1
            thread.join()
        assert not errors
        assert written > 1
        assert "could not truncate the WAL" in caplog.text  # the reader kept its snapshot
    finally:
        reader.kill()
        reader.wait()
        other.close()
        ledger.close()
    with sqlite3.connect(path) as db:  # the reader gone, the close finished the erasure
        assert db.execute("SELECT count(*) FROM events").fetchone()[0] == written + 2
    assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0


# -- the last event's time, read in the write section ---------------------------------------------

#: Another process with a clock an hour ahead appends one fact.
AHEAD = """
import sys
from datetime import datetime, timedelta, timezone
from agent_custody_state import Ledger
ahead = datetime.now(timezone.utc) + timedelta(hours=1)
with Ledger(sys.argv[1], clock=lambda: ahead) as ledger:
    print(ledger.assert_fact(subject="ahead", predicate="p", value=1, space="o", actor="a").tx_time)
"""


def test_a_write_after_another_processs_commit_is_stamped_after_it(tmp_path: Path) -> None:
    """``last_tx_time`` and the chain head are remembered from this connection's own commit:
    another process's commit in between (its clock ahead) must be read, inside the section."""
    path = tmp_path / "ledger.sqlite"
    with Ledger(path) as ledger:
        ledger.assert_fact(**FACT, value="first")
        ledger.assert_fact(**FACT, value="second")  # the head and time now remembered
        done = subprocess.run(
            [sys.executable, "-c", AHEAD, str(path)], capture_output=True, text=True, check=True
        )
        theirs = done.stdout.strip()
        mine = ledger.assert_fact(**{**FACT, "subject": "mine"}, value="third")
        assert mine.tx_time >= theirs
        again = ledger.assert_fact(**{**FACT, "subject": "again"}, value="fourth")
        assert again.tx_time >= mine.tx_time
    assert main(["verify", "--ledger", str(path), "--json"]) == 0  # the chain whole


def test_a_write_reads_the_last_row_once(tmp_path: Path) -> None:
    """Each write asks the last event's time (``in_order``) and then the chain head: both from
    one read of the last row inside the section, and none while the remembered ones hold."""
    path = tmp_path / "ledger.sqlite"
    with Ledger(path) as ledger, Ledger(path) as other:
        ledger.assert_fact(**FACT, value="first")
        other.assert_fact(**{**FACT, "subject": "other"}, value="x")  # forgets what it knew
        backend = ledger.backend
        assert isinstance(backend, SqliteBackend)
        statements: list[str] = []
        backend._conn.connection.driver_connection.set_trace_callback(statements.append)
        ledger.assert_fact(**{**FACT, "subject": "t"}, value="second")
        last = [s for s in statements if "max(events.seq)" in s and "count" not in s]
        assert len(last) == 1, statements
        statements.clear()
        ledger.assert_fact(**{**FACT, "subject": "u"}, value="third")  # remembered: no read
        assert not [s for s in statements if "max(events.seq)" in s], statements


# -- files another program or user left -----------------------------------------------------------

#: Another program switches the ledger to rollback-journal mode and dies part-way through a
#: change that spilled to the file (a small cache): the ``-journal`` left is hot.
HALF_WRITTEN = """
import os, sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA journal_mode=DELETE")
db.execute("PRAGMA cache_size=1")
db.execute("BEGIN")
db.execute("UPDATE events SET json = replace(json, 'SECRET', 'HACKED')")
db.execute("CREATE TABLE spill (x)")
for _ in range(200):
    db.execute("INSERT INTO spill VALUES (?)", ("y" * 3000,))
os.kill(os.getpid(), 9)
"""


def test_a_read_only_open_never_reads_a_change_a_crashed_writer_left_half_done(
    tmp_path: Path,
) -> None:
    """``immutable=1`` ignores a hot ``-journal``: a read-only open read the uncommitted change
    of a rollback-journal writer killed part-way as if it had committed."""
    path, fact_id = _secret_ledger(tmp_path)
    subprocess.run([sys.executable, "-c", HALF_WRITTEN, str(path)], check=False)
    assert Path(f"{path}-journal").stat().st_size > 0  # left hot
    with pytest.raises(EventBackendError, match=r"ledger\.sqlite-journal is there.*for writing"):
        Ledger(path, read_only=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.sqlite", "ledger.sqlite-journal"]
    with Ledger(path) as writer:  # rolls the journal back
        fact = writer.get(fact_id)
        assert fact is not None and fact.value == "SECRET"
    with Ledger(path, read_only=True) as reader:
        fact = reader.get(fact_id)
        assert fact is not None and fact.value == "SECRET"


#: Opens a ledger for writing and prints what happened, as the user ``nobody`` when run by root
#: (root may open any file). A ledger opened first loads every module the open needs.
OPEN_AS_NOBODY = """
import os, pwd, sys, tempfile
from agent_custody_state_events_sqlite.store import SqliteBackend
scratch = SqliteBackend(os.path.join(tempfile.mkdtemp(), "warm.sqlite"))
with scratch.transaction():
    pass
scratch.close()
if os.geteuid() == 0:
    nobody = pwd.getpwnam("nobody")
    os.setgid(nobody.pw_gid)
    os.setuid(nobody.pw_uid)
try:
    backend = SqliteBackend(sys.argv[1])
    with backend.transaction():
        pass
    print("written")
except Exception as exc:
    print(exc)
"""

#: A writer killed with its -wal and -shm still there.
CRASHED = """
import os, sys
from agent_custody_state import Ledger
ledger = Ledger(sys.argv[1])
ledger.assert_fact(subject="s", predicate="p", value="v", space="o", actor="a")
os.kill(os.getpid(), 9)
"""


def test_sidecars_this_process_may_not_use_are_named(tmp_path: Path) -> None:
    """SQLite says "unable to open database file" and names no file: a ``-wal`` and ``-shm``
    left by another user's crashed process (here: mode 0000) are named with owner and mode."""
    folder = Path(tempfile.mkdtemp())  # a folder the user nobody can reach, unlike tmp_path
    try:
        folder.chmod(0o755)
        path = folder / "ledger.sqlite"
        subprocess.run([sys.executable, "-c", CRASHED, str(path)], check=False)
        for sidecar in ("-wal", "-shm"):
            Path(f"{path}{sidecar}").chmod(0)
        path.chmod(0o666)
        said = subprocess.run(
            [sys.executable, "-c", OPEN_AS_NOBODY, str(path)],
            capture_output=True,
            text=True,
            check=True,
            cwd=tmp_path,
        ).stdout
        assert said.startswith(f"cannot open {path}: unable to open database file"), said
        assert f"may not read and write {path}-wal (owner uid" in said
        assert "mode 0000" in said
    finally:
        shutil.rmtree(folder)


#: Another process holding the ledger's write lock until its stdin closes.
HOLDER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.read()
"""


def test_a_write_lock_held_past_the_busy_timeout_says_so(tmp_path: Path) -> None:
    """ "database is locked" alone does not say that the busy timeout ran out, nor which."""
    path = tmp_path / "ledger.sqlite"
    ledger = Ledger(path, busy_timeout=0.2)
    holder = _child(HOLDER, str(path))
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(EventBackendError) as refused:
            ledger.assert_fact(**FACT, value="v")
        assert str(refused.value) == (
            f"{path}: could not take the write lock: database is locked (process {holder.pid} "
            "kept it locked longer than the busy timeout, 0.2 s: try again, or open the ledger "
            "with a longer busy_timeout; a holder that is stopped or stuck must be resumed or "
            "ended)"
        )
    finally:
        holder.kill()
        holder.wait()
    ledger.assert_fact(**FACT, value="v")  # the lock released: the same ledger writes
    assert ledger.count() == 1
    ledger.close()


def test_a_wal_grown_behind_a_long_reader_shrinks_once_it_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A WAL that grew while another process held an old snapshot was reused from its start
    afterwards but never cut back: it stayed at its peak size until the last connection
    closed (20 times the database after 3,000 asserts beside one long read)."""
    from agent_custody_state_events_sqlite import pragmas

    monkeypatch.setattr(pragmas, "WAL_SIZE_LIMIT", 1024 * 1024)  # 16 MiB takes long to grow
    path = tmp_path / "ledger.sqlite"
    wal = Path(f"{path}-wal")
    with Ledger(path) as ledger:
        ledger.assert_fact(**FACT, value="first")
        reader = _child(LONG_READER, str(path))
        try:
            assert reader.stdout is not None and reader.stdout.readline().strip() == "holding"
            batch = 0
            while wal.stat().st_size < 6 * 1024 * 1024:  # past SQLite's checkpoint, 4 MiB
                ledger.assert_many(
                    {**FACT, "subject": f"b{batch}-{i}", "value": "x" * 1000} for i in range(50)
                )
                batch += 1
        finally:
            reader.kill()
            reader.wait()
        grown = wal.stat().st_size
        for i in range(20):  # a checkpoint after a commit, then a restart at the next
            ledger.assert_fact(**{**FACT, "subject": f"after{i}"}, value="v")
            if wal.stat().st_size <= 1024 * 1024:
                break
        assert wal.stat().st_size <= 1024 * 1024 < grown

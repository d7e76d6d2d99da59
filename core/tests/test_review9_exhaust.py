"""The ninth review: a JSONL ledger and its sidecars when the disk fills up.

A full disk is a file size limit (``RLIMIT_FSIZE``) in a forked child, with ``SIGXFSZ`` ignored,
so a write past it is cut short and the next one fails with ``EFBIG`` ("File too large"), as a
full disk cuts a write short and then fails with ``ENOSPC``. Space comes back when the limit is
lifted. After each failure: nothing half-written is left, the error names the file and the
cause, the same object and a fresh open work again, and ``verify`` passes.
"""

from __future__ import annotations

import contextlib
import errno
import io
import multiprocessing
import os
import resource
import signal
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state import AssertRequest, EventBackendError, Ledger
from agent_custody_state.backends.keystore_file import FileKeyStore
from agent_custody_state.cli import main
from agent_custody_state.ledger.keystore import KeyStoreError
from agent_custody_state.server.signing import generate_key_pair
from agent_custody_state.stores import StoreSet, VerifyPolicy
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore
from agent_custody_state.stores.outbox import Outbox

FACT: dict[str, Any] = {"predicate": "p", "space": "org", "actor": "a"}


@contextlib.contextmanager
def disk_full_past(size: int) -> Iterator[None]:
    """No file of this process may grow past ``size`` bytes until the block ends."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


@contextlib.contextmanager
def no_descriptor_left() -> Iterator[None]:
    """Every descriptor number this process may open is taken until the block ends."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lowest_free = os.open(os.devnull, os.O_RDONLY)
    os.close(lowest_free)
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def in_child(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a forked child (its file size limit is its own); its result, or the
    child's traceback as the failure."""
    ctx = multiprocessing.get_context("fork")
    ours, theirs = ctx.Pipe()

    def run() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        try:
            theirs.send(("ok", fn(*args)))
        except BaseException:
            theirs.send(("error", traceback.format_exc()))

    child = ctx.Process(target=run)
    child.start()
    try:
        assert ours.poll(60), "the child did not answer"
        kind, value = ours.recv()
    finally:
        child.join(10)
    assert kind == "ok", value
    return value


def verified(path: Path) -> int:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return main(["verify", "--ledger", str(path)])


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def _checkpoint_on_a_full_disk(folder: Path, key: Path) -> dict[str, Any]:
    path = folder / "l.jsonl"
    notes = folder / "l.jsonl.checkpoints"
    with Ledger(path, checkpoint_key=key, checkpoint_every=2) as ledger:
        for i in range(3):
            ledger.assert_fact(subject=f"s{i}", value=i, **FACT)
        before = notes.read_bytes()
        error = None
        with disk_full_past(len(before) + 60):  # room for a third of a note
            try:
                ledger.checkpoint()
            except EventBackendError as exc:
                error = str(exc)
        after = notes.read_bytes()
        ledger.checkpoint()  # space is back
    return {"error": error, "unchanged": after == before, "verify": verified(path)}


def test_a_checkpoint_the_disk_cannot_take_leaves_no_half_note(tmp_path: Path) -> None:
    """A short write was taken for a whole note: the call reported a checkpoint kept, and the
    half note in the file failed every later ``verify`` ("a checkpoint cannot be read")."""
    private, _, _ = generate_key_pair(tmp_path / "keys" / "memory.key")
    got = in_child(_checkpoint_on_a_full_disk, tmp_path, private)
    assert got["error"] is not None, "a checkpoint cut short was reported kept"
    assert str(tmp_path / "l.jsonl.checkpoints") in got["error"]
    assert "File too large; nothing was written" in got["error"]
    assert got["unchanged"], "the checkpoint file keeps part of a note"
    assert got["verify"] == 0


def test_a_checkpoint_whose_fsync_fails_is_taken_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: a raw ``OSError`` (no file named), and the note stayed in the file though the
    caller was told it failed."""
    private, _, _ = generate_key_pair(tmp_path / "keys" / "memory.key")
    notes = tmp_path / "l.jsonl.checkpoints"
    real_fsync = os.fsync

    def failing(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}") == str(notes):
            raise OSError(errno.EIO, "Input/output error")
        real_fsync(fd)

    with Ledger(tmp_path / "l.jsonl", checkpoint_key=private, checkpoint_every=2) as ledger:
        for i in range(3):
            ledger.assert_fact(subject=f"s{i}", value=i, **FACT)
        before = notes.read_bytes()
        monkeypatch.setattr(os, "fsync", failing)
        with pytest.raises(EventBackendError) as caught:
            ledger.checkpoint()
        monkeypatch.setattr(os, "fsync", real_fsync)
        assert str(caught.value) == (
            f"could not add a checkpoint to {notes}: Input/output error; nothing was written"
        )
        assert notes.read_bytes() == before
        ledger.checkpoint()
    assert verified(tmp_path / "l.jsonl") == 0


# -- the outbox --------------------------------------------------------------------------------


def _forget_with_an_outbox(folder: Path, room: int) -> dict[str, Any]:
    box = folder / "l.outbox"
    store = InProcessStore("vectors")

    async def scenario() -> dict[str, Any]:
        with Ledger("memory:") as ledger:  # only the outbox is on the full disk
            custody = Custody(ledger, StoreSet([store], VerifyPolicy(1, 0)), outbox=box)
            request = AssertRequest(subject="s", predicate="p", value="v", space="o", actor="a")
            fact_id = (await custody.write(request)).event.fact_id
            error = None
            with disk_full_past(room):
                try:
                    await custody.forget(fact_id=fact_id, actor="dpo", reason="gdpr")
                except Exception as exc:
                    error = f"{type(exc).__name__}: {exc}"
            found = ledger.get(fact_id)
            left = box.read_bytes() if box.exists() else None
            owed = [o.fact_id for o in Outbox(box).pending()] if box.exists() else []
            held = sorted(r["metadata"]["factId"] for r in store.vendor.rows.values())
            if error is not None:  # space is back: the same flow works
                await custody.forget(fact_id=fact_id, actor="dpo", reason="gdpr")
            return {
                "error": error,
                "forgotten": found is not None and found.forgotten is not None,
                "held": held,
                "left": left,
                "owed": owed,
                "fact": fact_id,
                "after": ledger.get(fact_id).forgotten is not None,  # type: ignore[union-attr]
            }

    return anyio.run(scenario)  # type: ignore[no-any-return]


def test_an_owed_removal_the_disk_cannot_take_names_the_outbox_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    """Before: a raw ``OSError(27, 'File too large')`` naming no file (a memory server said
    "internal error"), and half an owe line left in a new outbox beside the ledger."""
    got = in_child(_forget_with_an_outbox, tmp_path, 100)
    assert got["error"] is not None and got["error"].startswith("OutboxError: ")
    assert (
        f"could not record owed removals in {tmp_path / 'l.outbox'}: File too large"
        in (got["error"])
    )
    assert not got["forgotten"] and got["held"] == [got["fact"]]  # refused before any change
    assert got["left"] is None, f"the outbox keeps {got['left']!r}"
    assert got["after"]


def test_a_settle_the_disk_cannot_take_does_not_fail_a_finished_forget(tmp_path: Path) -> None:
    """Room for the owe line, not for the settle: the forget committed and the store's copy
    was removed, but the caller got ``OSError`` and was told the forget failed."""
    got = in_child(_forget_with_an_outbox, tmp_path, 300)  # an owe line, not a settle
    assert got["error"] is None, got["error"]
    assert got["forgotten"] and got["held"] == []
    # The settle is lost as a crash loses it: the entry stays owed (the next start repeats the
    # removal, which every store accepts), and no half line is left.
    assert got["owed"] == [got["fact"]]
    assert got["left"] is not None and got["left"].endswith(b"\n")
    assert got["left"].count(b"\n") == 1


# -- a torn final line, repaired on a full disk ------------------------------------------------


def _torn_line_on_a_full_disk(folder: Path) -> dict[str, Any]:
    path = folder / "l.jsonl"
    with Ledger(path) as ledger:
        ledger.assert_fact(subject="s", value="v", **FACT)
    with open(path, "ab") as fh:
        fh.write(b'{"eventId":"half')  # a crash mid-append
    got: dict[str, Any] = {}
    with disk_full_past(10):
        try:
            ledger = Ledger(path)
        except Exception as exc:
            return {"open": f"{type(exc).__name__}: {exc}", "files": sorted(files(folder))}
        got["count"] = ledger.count()
        try:
            ledger.assert_fact(subject="t", value="w", **FACT)
        except EventBackendError as exc:
            got["write"] = str(exc)
        got["files"] = sorted(files(folder))
    ledger.assert_fact(subject="t", value="w", **FACT)  # space is back
    got["after"] = ledger.count()
    got["repairs"] = list(ledger.store.repairs)  # type: ignore[attr-defined]
    ledger.close()
    with Ledger(path) as again:
        got["reopened"] = again.count()
    got["records"] = [n for n in files(folder) if ".torn-" in n]
    got["verify"] = verified(path)
    return got


def test_a_torn_line_the_full_disk_cannot_set_aside_leaves_no_record_and_opens(
    tmp_path: Path,
) -> None:
    """Before: the open failed with a bare ``OSError: [Errno 27] File too large`` (no file
    named), leaving a half-written ``.torn-*`` record per attempt."""
    got = in_child(_torn_line_on_a_full_disk, tmp_path)
    assert "open" not in got, got
    assert got["count"] == 1  # read as a reader reads it: the torn line ignored
    assert "torn final line at byte" in got["write"] and "File too large" in got["write"]
    assert ".torn-" in got["write"] and "refuses writes until it can be" in got["write"]
    assert got["files"] == ["l.jsonl", "l.jsonl.lock"], "a half record is left"
    assert got["after"] == 2 and got["reopened"] == 2
    assert len(got["repairs"]) == 1 and len(got["records"]) == 1
    assert got["verify"] == 0


def _unfinished_batch_on_a_full_disk(folder: Path) -> dict[str, Any]:
    path = folder / "l.jsonl"
    with Ledger(path) as ledger:
        ledger.assert_fact(subject="s", value="v", **FACT)
    with Ledger(folder / "other.jsonl") as other:
        other.assert_fact(subject="b", value="half a batch", **FACT)
    line = (folder / "other.jsonl").read_bytes()
    for extra in folder.glob("other.jsonl*"):
        extra.unlink()
    # What a writer killed inside a batch of events leaves: its journal, and the batch's start.
    size = path.stat().st_size
    (folder / "l.jsonl.batch").write_text(f'{{"offset": {size}, "length": {len(line) * 3}}}')
    with open(path, "ab") as fh:
        fh.write(line)
    got: dict[str, Any] = {}
    with disk_full_past(10):
        try:
            ledger = Ledger(path)
        except Exception as exc:
            return {"open": f"{type(exc).__name__}: {exc}", "files": sorted(files(folder))}
        got["count"] = ledger.count()
        try:
            ledger.assert_fact(subject="t", value="w", **FACT)
        except EventBackendError as exc:
            got["write"] = str(exc)
        got["files"] = sorted(files(folder))
    ledger.assert_fact(subject="t", value="w", **FACT)  # space is back
    got["after"] = [f.value for f in ledger.facts()]
    ledger.close()
    got["records"] = [n for n in files(folder) if ".torn-" in n]
    got["verify"] = verified(path)
    return got


def test_an_unfinished_batch_the_full_disk_cannot_roll_back_opens_and_leaves_no_record(
    tmp_path: Path,
) -> None:
    """Before: the open was refused ("could not be rolled back"), leaving half a ``.torn-*``
    record per attempt."""
    got = in_child(_unfinished_batch_on_a_full_disk, tmp_path)
    assert "open" not in got, got
    assert got["count"] == 1  # readers stop at the batch's start
    assert "the unfinished batch at byte" in got["write"] and "File too large" in got["write"]
    assert got["files"] == ["l.jsonl", "l.jsonl.batch", "l.jsonl.lock"]
    assert got["after"] == ["v", "w"] and len(got["records"]) == 1
    assert got["verify"] == 0


def _forget_with_a_certificate_on_a_full_disk(folder: Path, private: Path, public: Path) -> Any:
    path = folder / "l.jsonl"
    with Ledger(path) as ledger:
        fact_id = ledger.assert_fact(subject="s", value="secret", **FACT).fact_id
    out, err = io.StringIO(), io.StringIO()
    args = ["forget", "--ledger", str(path), "--fact", fact_id, "--reason", "gdpr"]
    args += ["--certificate", str(folder / "c.json"), "--key", str(private)]
    # Room for the ledger's rewrite, not for the certificate (a few kilobytes).
    with disk_full_past(path.stat().st_size + 700):
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(args)
    kept = folder / "kept.json"
    kept.write_text(out.getvalue())  # what the operator saves from the terminal
    with contextlib.redirect_stdout(io.StringIO()) as checked:
        verdict = main(["certificate", "verify", "--key", str(public), str(kept)])
    with Ledger(path) as ledger:
        forgotten = ledger.get(fact_id).forgotten is not None  # type: ignore[union-attr]
    names = sorted(p.name for p in folder.iterdir() if p.name != "keys")
    return code, err.getvalue(), names, verdict, checked.getvalue(), forgotten


def test_a_certificate_the_disk_cannot_take_is_not_left_half_written_nor_lost(
    tmp_path: Path,
) -> None:
    """Before: ``error: File too large`` naming no file, half a certificate left at the path
    (which ``--certificate`` then refuses as existing), and the certificate, which cannot be
    issued again, lost."""
    private, public, _ = generate_key_pair(tmp_path / "keys" / "memory.key")
    code, err, names, verdict, checked, forgotten = in_child(
        _forget_with_a_certificate_on_a_full_disk, tmp_path, private, public
    )
    assert code == 1 and forgotten
    assert f"could not be written to {tmp_path / 'c.json'}: File too large" in err
    assert "the fact is forgotten" in err
    assert names == ["kept.json", "l.jsonl", "l.jsonl.lock"], "a half or stray file is left"
    assert verdict == 0 and checked.startswith("ok"), checked


def _forget_with_no_descriptor_left(folder: Path) -> dict[str, Any]:
    path = folder / "l.jsonl"
    got: dict[str, Any] = {}
    with Ledger(path) as ledger:
        fact_id = ledger.assert_fact(subject="s", value="secret", **FACT).fact_id
        before = path.read_bytes()
        with no_descriptor_left():
            try:
                ledger.forget(fact_id=fact_id, actor="dpo", reason="gdpr")
            except Exception as exc:
                got["error"] = f"{type(exc).__name__}: {exc}"
        got["unchanged"] = path.read_bytes() == before
        got["value"] = ledger.get(fact_id).value  # type: ignore[union-attr]
        ledger.forget(fact_id=fact_id, actor="dpo", reason="gdpr")  # descriptors are back
        got["after"] = ledger.get(fact_id).value  # type: ignore[union-attr]
    with no_descriptor_left():
        try:
            FileKeyStore(folder / "k.keys")
        except KeyStoreError as exc:
            got["keys"] = str(exc)
    got["files"] = sorted(files(folder))
    got["verify"] = verified(path)
    return got


def test_no_descriptor_left_is_a_named_refusal_not_a_raw_os_error(tmp_path: Path) -> None:
    """Before: ``OSError: [Errno 24] Too many open files`` out of ``forget`` (a memory server's
    "internal error", with a traceback in its log), and out of a key store's open."""
    got = in_child(_forget_with_no_descriptor_left, tmp_path)
    batch = tmp_path / "l.jsonl.batch"
    assert got["error"] == (
        f"EventBackendError: {tmp_path / 'l.jsonl'}: could not read {batch}: Too many open "
        "files; nothing was changed"
    )
    assert got["unchanged"] and got["value"] == "secret"  # not erased, not reported erased
    assert got["after"] is None
    assert got.get("keys") == f"key store {tmp_path / 'k.keys'}: Too many open files"
    assert got["files"] == ["l.jsonl", "l.jsonl.lock"] and got["verify"] == 0

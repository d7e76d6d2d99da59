"""The JSONL backend's files (issue 11.5/11.6): no folder created, every created file 0600 under
any umask, an operator's mode kept, and no forgotten value left in a set-aside torn line."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import EventBackendError, Ledger
from agent_custody_state.backends import jsonl_recovery
from agent_custody_state.backends.jsonl import JsonlBackend


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(params=[0o022, 0o000, 0o277], ids=["umask022", "umask000", "umask277"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """Run the test under a umask (0o277 would make a plain ``open(..., 0o600)`` read-only)."""
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


# -- no folder is ever created -------------------------------------------------------------------


def test_a_missing_folder_is_refused_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "unmounted" / "deeper"
    with pytest.raises(EventBackendError) as caught:
        Ledger(missing / "ledger.jsonl")
    message = str(caught.value)
    assert "\n" not in message
    assert f"the folder {missing} does not exist; create it first" in message
    assert not (tmp_path / "unmounted").exists()
    assert list(tmp_path.iterdir()) == []


def test_a_folder_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notadir").write_text("x")
    with pytest.raises(EventBackendError, match="is not a folder"):
        JsonlBackend(tmp_path / "notadir" / "ledger.jsonl")


def test_a_relative_path_in_the_working_folder_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with Ledger("ledger.jsonl") as ledger:
        ledger.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")
    assert (tmp_path / "ledger.jsonl").exists()


# -- owner-only files ------------------------------------------------------------------------------


def test_every_created_file_is_owner_only(
    tmp_path: Path, umask: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ledger, lock, batch journal, torn-line record and forget temporary: each 0600 while it
    exists, whatever the umask. The journal and the temporary are short-lived, so their mode is
    taken at the moment the backend is about to remove or rename them."""
    seen: dict[str, int] = {}
    real_end, real_replace = jsonl_recovery.Recovery.end_batch, os.replace

    def end_batch(self: Any) -> None:
        seen["batch"] = _mode(self.journal)
        real_end(self)

    def replace(src: Any, dst: Any) -> None:
        seen["forget temporary"] = _mode(Path(src))
        real_replace(src, dst)

    monkeypatch.setattr(jsonl_recovery.Recovery, "end_batch", end_batch)
    monkeypatch.setattr(os, "replace", replace)
    path = tmp_path / "ledger.jsonl"
    with Ledger(path) as ledger:
        fact = ledger.assert_fact(subject="s", predicate="p", value="v", space="org", actor="a")
        ledger.assert_many(
            [
                {"subject": f"b{i}", "predicate": "p", "value": i, "space": "org", "actor": "a"}
                for i in range(5)
            ]
        )
        ledger.forget(fact_id=fact.fact_id, actor="dpo", reason="erasure")
    with open(path, "ab") as fh:
        fh.write(b'{"eventId":"torn-by-a-crash","kind":"ass')
    with Ledger(path) as ledger:
        assert "torn final line" in ledger.backend.repairs[0]  # type: ignore[attr-defined]
    torn = list(tmp_path.glob("ledger.jsonl.torn-*"))
    assert len(torn) == 1
    seen.update(
        {
            "ledger": _mode(path),
            "lock": _mode(tmp_path / "ledger.jsonl.lock"),
            "torn": _mode(torn[0]),
        }
    )
    assert seen == dict.fromkeys(["batch", "forget temporary", "ledger", "lock", "torn"], 0o600), (
        oct(umask)
    )


@pytest.mark.parametrize("chosen", [0o644, 0o640])
def test_an_existing_ledger_keeps_the_mode_its_operator_chose(tmp_path: Path, chosen: int) -> None:
    """Appends leave an existing file's mode alone, and a forget (which renames a rewrite over
    the ledger) gives the new file the old one's mode."""
    path = tmp_path / "ledger.jsonl"
    path.touch()
    path.chmod(chosen)
    with Ledger(path) as ledger:
        fact = ledger.assert_fact(subject="s", predicate="p", value="v", space="org", actor="a")
        assert _mode(path) == chosen
        ledger.forget(fact_id=fact.fact_id, actor="dpo", reason="erasure")
    assert _mode(path) == chosen
    assert _mode(tmp_path / "ledger.jsonl.lock") == 0o600  # created by the backend


def test_the_mode_mark_is_owner_only(tmp_path: Path, umask: int) -> None:
    """The crypto-shred mark (``<ledger>.mode``) is created 0600 like the ledger and its key
    store: it names where the keys are kept."""
    path = tmp_path / "ledger.jsonl"
    with Ledger(path, forget_mode="crypto-shred") as ledger:
        ledger.assert_fact(subject="s", predicate="p", value="v", space="org", actor="a")
    assert _mode(tmp_path / "ledger.jsonl.mode") == 0o600


# -- a torn line keeps no value --------------------------------------------------------------------


SECRET_PREFIX = 'pässwörd "quoted" '


def _needles(value: str) -> list[bytes]:
    """The value's bytes as a scan must look for them: raw UTF-8 and JSON-escaped (both ways)."""
    return [
        value.encode(),
        json.dumps(value)[1:-1].encode(),
        json.dumps(value, ensure_ascii=False)[1:-1].encode(),
    ]


def _hits(folder: Path, needles: list[bytes]) -> list[str]:
    return sorted(
        p.name for p in folder.rglob("*") if p.is_file() for n in needles if n in p.read_bytes()
    )


def _assert_line(folder: Path, value: str) -> bytes:
    """An assert line holding ``value``, written by another ledger (as the crashed write would)."""
    with Ledger(folder / "other.jsonl") as other:
        other.assert_fact(subject="dana", predicate="email", value=value, space="user:d", actor="a")
    return (folder / "other.jsonl").read_bytes()


def test_forget_leaves_no_copy_in_a_set_aside_torn_line(tmp_path: Path) -> None:
    """A crash tore the line of a second write of the same value; the next writer set it aside.
    Forgetting the fact must leave the value nowhere in the ledger's folder: the set-aside
    record keeps only the torn bytes' offset, length and sha256."""
    secret = SECRET_PREFIX + uuid.uuid4().hex
    scratch, folder = tmp_path / "scratch", tmp_path / "ledger"
    scratch.mkdir()
    folder.mkdir()
    line = _assert_line(scratch, secret)
    written = json.dumps(secret, ensure_ascii=False)[1:-1].encode()  # as the line holds it
    torn = line[: line.index(written) + len(written) + 5]  # cut just after the value
    path = folder / "ledger.jsonl"
    with Ledger(path) as ledger:
        fact = ledger.assert_fact(
            subject="dana", predicate="email", value=secret, space="user:d", actor="a"
        )
    size = path.stat().st_size
    with open(path, "ab") as fh:
        fh.write(torn)
    with Ledger(path) as ledger:  # opening repairs: the torn line is cut off and recorded
        assert ledger.count() == 1
        assert _hits(folder, _needles(secret)), "the scan must see the value before the forget"
        ledger.forget(fact_id=fact.fact_id, actor="dpo", reason="erasure")
    assert _hits(folder, _needles(secret)) == []
    (record_path,) = folder.glob("ledger.jsonl.torn-*")
    record = json.loads(record_path.read_text())
    assert record["setAside"] == "torn final line"
    assert (record["offset"], record["length"]) == (size, len(torn))
    assert record["sha256"] == hashlib.sha256(torn).hexdigest()


def test_forget_leaves_no_copy_in_a_rolled_back_batch(tmp_path: Path) -> None:
    """The same for an unfinished batch (complete lines, but the journal shows the batch cut
    short): rolled back and recorded without its bytes."""
    secret = SECRET_PREFIX + uuid.uuid4().hex
    scratch, folder = tmp_path / "scratch", tmp_path / "ledger"
    scratch.mkdir()
    folder.mkdir()
    line = _assert_line(scratch, secret)
    path = folder / "ledger.jsonl"
    with Ledger(path) as ledger:
        fact = ledger.assert_fact(
            subject="dana", predicate="email", value=secret, space="user:d", actor="a"
        )
    size = path.stat().st_size
    # What a crash leaves: the journal of a two-line batch, and only its first line written.
    (folder / "ledger.jsonl.batch").write_text(
        json.dumps({"offset": size, "length": 2 * len(line)})
    )
    with open(path, "ab") as fh:
        fh.write(line)
    with Ledger(path) as ledger:
        assert ledger.count() == 1
        assert "cut short" in ledger.backend.repairs[0]  # type: ignore[attr-defined]
        ledger.forget(fact_id=fact.fact_id, actor="dpo", reason="erasure")
    assert _hits(folder, _needles(secret)) == []
    (record_path,) = folder.glob("ledger.jsonl.torn-*")
    record = json.loads(record_path.read_text())
    assert (record["setAside"], record["offset"], record["length"]) == (
        "unfinished batch",
        size,
        len(line),
    )
    assert record["sha256"] == hashlib.sha256(line).hexdigest()

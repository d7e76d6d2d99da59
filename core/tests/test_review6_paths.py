"""Sixth review: one JSONL ledger, many spellings of its path (docs/decisions.md, "One ledger,
many spellings"). A symlink, a relative path, a link an older version wrote sidecars after, and
a hard link must all reach the same key store, mode mark and checkpoints, or be refused."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state import EventBackendError, Ledger, LedgerError
from agent_custody_state.ledger.certificate import CertificateOptions
from agent_custody_state.ledger.checkpoints import split_notes

KEY = Ed25519PrivateKey.generate()
SECRET = "dana.private@example.org"


def _assert(ledger: Ledger, value: Any, predicate: str = "email") -> str:
    event = ledger.assert_fact(
        subject="s", predicate=predicate, value=value, space="org", actor="a"
    )
    return event.fact.fact_id


def _linked(tmp_path: Path) -> tuple[Path, Path, str]:
    """A crypto-shred ledger ``a.jsonl`` with one fact, and a symlink ``b.jsonl`` to it."""
    real, link = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    with Ledger(real, forget_mode="crypto-shred") as ledger:
        fact_id = _assert(ledger, SECRET)
    link.symlink_to(real.name)
    return real, link, fact_id


def _kids(store: Path) -> set[str]:
    with sqlite3.connect(store) as conn:
        return {row[0] for row in conn.execute("SELECT kid FROM keys")}


def test_a_plain_opener_through_a_symlink_is_refused_values(tmp_path: Path) -> None:
    """The mode mark was named after the path as given: through the link, ``b.jsonl.mode`` did
    not exist, the ledger read as plain, and a plain process wrote its value unencrypted into
    a crypto-shred ledger."""
    real, link, _ = _linked(tmp_path)
    with Ledger(link) as ledger, pytest.raises(LedgerError, match="crypto-shred mode"):
        _assert(ledger, "plaintext-through-the-link", "other")
    assert b"plaintext-through-the-link" not in real.read_bytes()


def test_a_symlink_and_its_file_share_one_key_store(tmp_path: Path) -> None:
    """Through the link a second, empty key store ``b.jsonl.keys`` was created: the value
    written through the file's own name read as null, and a forget through the link left its
    key alive in ``a.jsonl.keys``."""
    real, link, fact_id = _linked(tmp_path)
    with Ledger(link, forget_mode="crypto-shred") as ledger:
        fact = ledger.get(fact_id)
        assert fact is not None and fact.value == SECRET
        kids_before = _kids(tmp_path / "a.jsonl.keys")
        ledger.forget(fact_id=fact_id, actor="dpo", reason="gdpr")
    assert not (tmp_path / "b.jsonl.keys").exists()
    assert not (tmp_path / "b.jsonl.mode").exists()
    assert len(_kids(tmp_path / "a.jsonl.keys")) < len(kids_before)  # its key destroyed
    with Ledger(real, forget_mode="crypto-shred") as ledger:
        forgotten = ledger.get(fact_id)
        assert forgotten is None or forgotten.value is None


def test_a_relative_spelling_records_the_key_store_by_the_files_own_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mark recorded ``a.jsonl.keys``, relative to the writer's working folder: a reader
    in another folder found "no such key store"."""
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    with Ledger("a.jsonl", forget_mode="crypto-shred") as ledger:
        fact_id = _assert(ledger, SECRET)
    mark = json.loads((tmp_path / "sub" / "a.jsonl.mode").read_text())
    assert mark["key_store"] == str(tmp_path / "sub" / "a.jsonl.keys")
    monkeypatch.chdir(tmp_path)
    with Ledger(tmp_path / "sub" / "a.jsonl", read_only=True, forget_mode="crypto-shred") as ro:
        fact = ro.get(fact_id)
        assert fact is not None and fact.value == SECRET


def test_a_mark_an_older_version_recorded_relative_still_finds_its_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Marks written before this review hold the default key store as the writer spelled it."""
    (tmp_path / "sub").mkdir()
    real = tmp_path / "sub" / "a.jsonl"
    with Ledger(real, forget_mode="crypto-shred") as ledger:
        fact_id = _assert(ledger, SECRET)
    mark = {"forget_mode": "crypto-shred", "key_store": "a.jsonl.keys"}
    (tmp_path / "sub" / "a.jsonl.mode").write_text(json.dumps(mark) + "\n")
    monkeypatch.chdir(tmp_path)
    with Ledger(real, read_only=True, forget_mode="crypto-shred") as ro:
        fact = ro.get(fact_id)
        assert fact is not None and fact.value == SECRET


def _older_layout(tmp_path: Path) -> tuple[Path, Path, str]:
    """What an older version left: a ledger written through ``b.jsonl -> a.jsonl`` in
    crypto-shred mode, its key store and mark named after the link."""
    real, link = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    with Ledger(link, forget_mode="crypto-shred") as ledger:  # a file for now: named "b"
        fact_id = _assert(ledger, SECRET)
    link.rename(real)
    link.symlink_to(real.name)
    (tmp_path / "b.jsonl.lock").unlink()
    assert (tmp_path / "b.jsonl.keys").exists() and (tmp_path / "b.jsonl.mode").exists()
    return real, link, fact_id


@pytest.mark.parametrize("through", ["link", "file"])
def test_sidecars_an_older_version_named_after_a_symlink_are_used(
    tmp_path: Path, through: str
) -> None:
    """Found and used, through either name; never a second key store beside the file."""
    real, link, fact_id = _older_layout(tmp_path)
    path = link if through == "link" else real
    with Ledger(path) as plain, pytest.raises(LedgerError, match="crypto-shred mode"):
        _assert(plain, "plaintext", "other")
    with Ledger(path, forget_mode="crypto-shred") as ledger:
        fact = ledger.get(fact_id)
        assert fact is not None and fact.value == SECRET
        _assert(ledger, "second", "other")
    # One key store: the file's own name is now a link to the older one, and the mark is
    # beside the file too, naming it.
    assert os.readlink(tmp_path / "a.jsonl.keys") == "b.jsonl.keys"
    mark = json.loads((tmp_path / "a.jsonl.mode").read_text())
    assert mark["key_store"] == str(tmp_path / "a.jsonl.keys")
    link.unlink()  # the link gone: the file's own name still finds the keys
    with Ledger(real, forget_mode="crypto-shred") as ledger:
        fact = ledger.get(fact_id)
        assert fact is not None and fact.value == SECRET


def test_two_key_stores_of_one_ledger_are_refused_naming_both(tmp_path: Path) -> None:
    """An older version through the link and a writer through the file each made one."""
    real, link, _ = _older_layout(tmp_path)
    (tmp_path / "a.jsonl.keys").write_bytes((tmp_path / "b.jsonl.keys").read_bytes())
    for path in (real, link):
        with pytest.raises(EventBackendError, match="two key stores") as caught:
            Ledger(path, forget_mode="crypto-shred")
        assert str(tmp_path / "a.jsonl.keys") in str(caught.value)
        assert str(tmp_path / "b.jsonl.keys") in str(caught.value)


def test_checkpoints_are_the_files_whatever_spelling_keeps_or_reads_them(tmp_path: Path) -> None:
    real, link = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    with Ledger(real, checkpoint_key=KEY) as ledger:
        _assert(ledger, 1)
        ledger.checkpoint()
    link.symlink_to(real.name)
    (tmp_path / "b.jsonl.checkpoints").write_text((tmp_path / "a.jsonl.checkpoints").read_text())
    with Ledger(link, checkpoint_key=KEY) as ledger:
        _assert(ledger, 2)
        ledger.checkpoint()
        log = ledger.backend.checkpoint_log()
        assert log is not None and log.location == str(tmp_path / "a.jsonl.checkpoints")
        assert len(log.notes()) == 2  # the older file's note read once, with the new one
    assert len(split_notes((tmp_path / "a.jsonl.checkpoints").read_text())) == 2


def test_a_hard_linked_ledger_is_refused_for_writing(tmp_path: Path) -> None:
    """A hard link had its own lock and mode mark (a plain write into a crypto-shred ledger),
    and a forget through one name renamed a new file over it, leaving every value in the
    other."""
    real, other = tmp_path / "a.jsonl", tmp_path / "c.jsonl"
    with Ledger(real, forget_mode="crypto-shred") as ledger:
        fact_id = _assert(ledger, SECRET)
    os.link(real, other)
    for path in (real, other):
        with pytest.raises(EventBackendError, match="hard links"):
            Ledger(path)
    with Ledger(other, read_only=True) as reader:  # reading changes nothing: allowed
        assert reader.get(fact_id) is not None


def test_a_forget_refuses_a_file_hard_linked_since_the_open(tmp_path: Path) -> None:
    real, other = tmp_path / "a.jsonl", tmp_path / "copy.jsonl"
    with Ledger(real) as ledger:
        fact_id = _assert(ledger, SECRET)
        os.link(real, other)
        with pytest.raises(EventBackendError, match="hard links"):
            ledger.forget(fact_id=fact_id, actor="dpo", reason="gdpr")
    assert os.stat(real).st_ino == os.stat(other).st_ino  # not split: nothing left behind


def test_the_byte_scan_names_the_real_files_through_a_symlink(tmp_path: Path) -> None:
    real, link, fact_id = _linked(tmp_path)
    with Ledger(link, forget_mode="crypto-shred") as ledger:
        done = ledger.forget(
            fact_id=fact_id, actor="dpo", reason="r", certificate=CertificateOptions(key=KEY)
        )
    scan = done.predicate["verification"]["byteScan"]
    scanned = [f["path"] for f in scan["files"]]
    assert str(real) in scanned and str(tmp_path / "a.jsonl.keys") in scanned
    assert not any(p.startswith(str(link)) for p in scanned)
    assert len(scanned) == len({os.path.realpath(p) for p in scanned})
    assert scan["hits"] == 0


def test_a_refused_first_open_through_a_symlink_leaves_no_sidecar(tmp_path: Path) -> None:
    """Through a link naming no file yet, the sidecars are made beside the file it names; a
    refused open took back only those named after the link, leaving a lock, key store and mode
    mark beside a ledger that was never created."""
    link = tmp_path / "current.jsonl"
    link.symlink_to("ledger-2027.jsonl")
    with pytest.raises(LedgerError, match="private key"):
        Ledger(link, forget_mode="crypto-shred", checkpoint_key=b"not a key")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["current.jsonl"]


def test_verify_through_a_symlink_checks_the_files_checkpoints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``verify`` read ``<link>.checkpoints``, the spelling given: with checkpoints kept beside
    the file itself, a check through a link found none and said so."""
    from cryptography.hazmat.primitives import serialization

    from agent_custody_state.cli import main

    real, link = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    with Ledger(real, checkpoint_key=KEY) as ledger:
        _assert(ledger, 1)
        ledger.checkpoint()
    link.symlink_to(real.name)
    pub = tmp_path / "k.pub"
    pub.write_bytes(
        KEY.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    capsys.readouterr()
    for spelling in (real, link):
        assert main(["verify", "--ledger", str(spelling), "--key", str(pub), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["checkpoints"] == 1, spelling


def test_one_outbox_whatever_spelling(tmp_path: Path) -> None:
    """The outbox of owed store removals was ``<location>.outbox``: removals recorded by a
    server opened through a link were never retried by one opened by the file's own name."""
    from agent_custody_state.stores.outbox import outbox_path

    real, link = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    Ledger(real).close()
    link.symlink_to(real.name)
    own = tmp_path / "a.jsonl.outbox"
    assert outbox_path(str(link), None) == outbox_path(str(real), None) == own
    (tmp_path / "b.jsonl.outbox").write_text("")  # an older version's, named after the link
    assert outbox_path(str(real), None) == tmp_path / "b.jsonl.outbox"
    own.write_text("")
    with pytest.raises(EventBackendError, match="two outbox files"):
        outbox_path(str(link), None)


def test_export_through_a_symlink_refuses_the_files_own_sidecars(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``export --out`` refused the ledger's mode mark and key store only by the spelling
    given: through a link, ``--out a.jsonl.mode --force`` replaced the file's own mark."""
    from agent_custody_state.cli import main

    _, link, _ = _linked(tmp_path)
    for sidecar in ("a.jsonl.mode", "a.jsonl.keys"):
        target = tmp_path / sidecar
        before = target.read_bytes()
        argv = ["export", "--ledger", str(link), "--out", str(target), "--force"]
        assert main(argv) == 1
        assert "is a file of the ledger" in capsys.readouterr().err
        assert target.read_bytes() == before


def test_a_certificate_names_the_file_itself(tmp_path: Path) -> None:
    """The certificate's ``media.location`` was the spelling that opened the ledger: through a
    link, the link's name, which may be gone (or point elsewhere) by the time it is read."""
    from agent_custody_state.keys import PublicKeyRef
    from agent_custody_state.ledger.certverify import check_certificate

    real, link, fact_id = _linked(tmp_path)
    with Ledger(link, forget_mode="crypto-shred") as ledger:
        done = ledger.forget(
            fact_id=fact_id, actor="dpo", reason="r", certificate=CertificateOptions(key=KEY)
        )
    statement = check_certificate(done.certificate, PublicKeyRef.of(KEY.public_key()))
    assert statement["predicate"]["media"]["location"] == str(real)


def test_a_loop_of_symlinks_is_refused_by_name_and_leaves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``a.jsonl -> b.jsonl -> a.jsonl``: the open failed with a raw OSError (ELOOP) after it
    had made ``a.jsonl.lock``, and the command line called it a missing ledger."""
    from agent_custody_state.cli import main

    (tmp_path / "a.jsonl").symlink_to("b.jsonl")
    (tmp_path / "b.jsonl").symlink_to("a.jsonl")
    with pytest.raises(EventBackendError, match="a loop of symlinks"):
        Ledger(tmp_path / "a.jsonl")
    assert main(["facts", "--ledger", str(tmp_path / "a.jsonl")]) == 1
    assert "a loop of symlinks" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl", "b.jsonl"]

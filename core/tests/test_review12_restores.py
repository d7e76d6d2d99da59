"""Crypto-shred mode across backups and restores (docs/forget.md, "Backups: keep keys and events
apart" and "After a restore from backup").

A forget destroys the fact's data key; a key-store backup taken before the forget still holds
it, and restored alone (the ledger current) it opens every old copy of the events again, while
the ledger no longer names the key (the forgotten assert's value is null). Each doom now appends
the key ids and their fact to an erasure log beside the ledger (``<ledger>.shredded``, which
travels with the ledger's backups), so ``verify`` with the key store reports each key that came
back, and ``repair --forget-mode crypto-shred`` and ``certificate reapply`` destroy it again.
With ledger and key store restored together, ``reapply`` forgets the fact again and no byte of
the key is left in the key store file.
"""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main as cli_main
from agent_custody_state.server.signing import generate_key_pair
from agent_custody_state.stores.flows import Custody

SECRET = "restored.key.secret@example.org"
KEPT = "kept.value@example.org"


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = cli_main(list(args))
    out = capsys.readouterr()
    return code, out.out + out.err


class Folder:
    """A crypto-shred JSONL ledger with its default key store, a backup of both taken before the
    forget of ``gone`` (``KEPT``'s fact stays), and the forget's certificate in ``certs``."""

    def __init__(self, root: Path, *, keys_apart: bool = False) -> None:
        self.live, self.backup, self.certs = root / "live", root / "backup", root / "certs"
        self.live.mkdir()
        self.certs.mkdir()
        self.key, self.pub, _ = generate_key_pair(root / "k.key")
        self.ledger = self.live / "l.jsonl"
        # The default beside the ledger, or on "another volume" as production should have it.
        self.keys = root / "vault" / "l.keys" if keys_apart else self.live / "l.jsonl.keys"
        self.keys.parent.mkdir(exist_ok=True)
        self.keys_backup = root / "keys.backup"
        with self.open() as ledger:
            self.gone = ledger.assert_fact(
                subject="u:1", predicate="email", value=SECRET, space="org", actor="a"
            ).fact_id
            self.kept = ledger.assert_fact(
                subject="u:2", predicate="email", value=KEPT, space="org", actor="a"
            ).fact_id
        line = json.loads(self.ledger.read_text().splitlines()[0])
        self.kid = line["fact"]["value"]["kid"]
        with self.open() as ledger:
            self.material = ledger.backend.keystore().get({self.kid})[self.kid]
        shutil.copytree(self.live, self.backup)
        shutil.copy(self.keys, self.keys_backup)
        with self.open() as ledger:
            custody = Custody(ledger, certificates=self.certs, certificate_key=str(self.key))
            anyio.run(lambda: custody.forget(fact_id=self.gone, actor="dpo", reason="gdpr"))

    def open(self, ledger: Path | None = None, keys: Path | None = None) -> Ledger:
        return Ledger(
            ledger or self.ledger, forget_mode="crypto-shred", key_store=str(keys or self.keys)
        )

    def key_in(self, path: Path) -> bool:
        """Whether ``path``'s bytes hold the data key (raw, hex or base64)."""
        data = path.read_bytes()
        forms = (self.material, self.material.hex().encode(), base64.b64encode(self.material))
        return any(form in data for form in forms)

    def old_copy_reads(self, tmp: Path) -> Any:
        """The forgotten fact's value in a copy of the backup's events, read with today's key
        store: what anyone holding an old copy of the events gets."""
        copy = tmp / "old"
        copy.mkdir()
        shutil.copy(self.backup / "l.jsonl", copy / "l.jsonl")
        with self.open(copy / "l.jsonl", self.keys) as ledger:
            fact = ledger.get(self.gone)
            assert fact is not None
            value = fact.value
        shutil.rmtree(copy)
        return value

    def reapply(self, *more: str) -> list[str]:
        return [
            "certificate",
            *("reapply", str(self.certs), "--ledger", str(self.ledger), "--key", str(self.pub)),
            *more,
        ]


@pytest.fixture(params=[False, True], ids=["keys-beside", "keys-apart"])
def folder(tmp_path: Path, request: pytest.FixtureRequest) -> Folder:
    return Folder(tmp_path, keys_apart=request.param)


def test_a_forget_logs_its_data_key_beside_the_ledger(folder: Folder) -> None:
    log = folder.live / "l.jsonl.shredded"
    records = [json.loads(x) for x in log.read_text().splitlines() if x]
    assert records == [{"factId": folder.gone, "keyIds": [folder.kid]}]
    assert log.stat().st_mode & 0o777 == 0o600
    assert not folder.key_in(folder.keys)  # the forget destroyed the key itself
    assert "shredded" not in folder.ledger.read_text()  # the events are as before
    with folder.open() as ledger:  # the log holds no value, and reads are unchanged
        assert SECRET.encode() not in log.read_bytes()
        fact = ledger.get(folder.gone)
        assert fact is not None and fact.value is None and fact.forgotten is not None


def test_a_key_store_restored_alone_fails_verify_and_repair_destroys_the_key_again(
    folder: Folder, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert folder.old_copy_reads(tmp_path) is None  # the forget reached every copy
    shutil.copy(folder.keys_backup, folder.keys)  # the key store restored alone
    assert folder.key_in(folder.keys)
    assert folder.old_copy_reads(tmp_path) == SECRET  # the promise is broken: an old copy opens
    code, out = cli(capsys, "verify", "--ledger", str(folder.ledger))
    assert code == 1, out
    assert f"fact {folder.gone} is forgotten, but its data key {folder.kid} is in the key" in out
    code, out = cli(
        capsys, "repair", "--ledger", str(folder.ledger), "--forget-mode", "crypto-shred"
    )
    assert code == 0 and "destroyed again the data keys of 1 forgotten fact(s)" in out, out
    for path in [*folder.live.iterdir(), *folder.keys.parent.iterdir()]:
        assert not folder.key_in(path), path.name
    assert folder.old_copy_reads(tmp_path) is None
    assert cli(capsys, "verify", "--ledger", str(folder.ledger))[0] == 0
    with folder.open() as ledger:
        assert ledger.get(folder.kept).value == KEPT  # the other facts' keys are untouched


def test_reapply_destroys_again_the_keys_a_restored_key_store_brought_back(
    folder: Folder, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(folder.keys_backup, folder.keys)
    before = {p.name: p.read_bytes() for p in folder.live.iterdir()}
    code, out = cli(capsys, *folder.reapply("--dry-run", "--json"))
    assert code == 0, out
    assert json.loads(out)["wouldDestroyKeys"] == [{"factId": folder.gone, "keyIds": [folder.kid]}]
    assert {p.name: p.read_bytes() for p in folder.live.iterdir()} == before
    code, out = cli(capsys, *folder.reapply())
    assert code == 0, out
    assert f"destroyed again the data key {folder.kid} of {folder.gone}" in out
    assert (
        "1 already forgotten" in out and "data keys of 1 forgotten fact(s) destroyed again" in out
    )
    assert not folder.key_in(folder.keys)
    assert folder.old_copy_reads(tmp_path) is None
    code, out = cli(capsys, *folder.reapply("--json"))  # a second run: nothing left to do
    assert code == 0 and json.loads(out)["keysDestroyed"] == [], out
    assert cli(capsys, "verify", "--ledger", str(folder.ledger))[0] == 0


def test_both_restored_reapply_leaves_no_byte_of_the_key_in_the_key_store(
    folder: Folder, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.rmtree(folder.live)
    shutil.copytree(folder.backup, folder.live)  # a folder copy: ledger and key store
    shutil.copy(folder.keys_backup, folder.keys)
    assert folder.key_in(folder.keys)
    with folder.open() as ledger:
        assert ledger.get(folder.gone).value == SECRET
    code, out = cli(capsys, *folder.reapply())
    assert code == 0 and f"forgot {folder.gone} (sha256 digest kept)" in out, out
    for path in [*folder.live.iterdir(), *folder.keys.parent.iterdir()]:  # bytes, not only rows
        assert not folder.key_in(path), path.name
        assert SECRET.encode() not in path.read_bytes(), path.name
    assert folder.old_copy_reads(tmp_path) is None
    assert cli(capsys, "verify", "--ledger", str(folder.ledger))[0] == 0


def test_a_fact_written_after_the_key_store_backup_is_reported_as_lost_with_the_restore(
    folder: Folder, capsys: pytest.CaptureFixture[str]
) -> None:
    with folder.open() as ledger:
        late = ledger.assert_fact(
            subject="u:3", predicate="email", value="late@example.org", space="org", actor="a"
        ).fact_id
    shutil.copy(folder.keys_backup, folder.keys)  # older than ``late``
    with folder.open() as ledger:
        assert ledger.get(late).value is None  # its key was not in the backup
    code, out = cli(capsys, "verify", "--ledger", str(folder.ledger), "--json")
    assert code == 1
    reasons = [p["reason"] for p in json.loads(out)["problems"]]
    assert any("key store restored from a backup older than the fact" in r for r in reasons)
    assert any(f"fact {folder.gone} is forgotten, but its data key" in r for r in reasons)


def test_only_keys_of_facts_the_ledger_records_forgotten_are_destroyed_again() -> None:
    """A doom is logged before its forget commits: a logged key whose fact is still live (its
    forget failed, its key spared) is never destroyed; the restored key of a forgotten one is."""
    with Ledger("memory:", forget_mode="crypto-shred") as ledger:
        shredder = ledger.backend
        keys = shredder.keystore()
        gone, live = (
            ledger.assert_fact(subject=s, predicate="p", value=s, space="o", actor="a").fact_id
            for s in ("gone", "live")
        )
        kids = {f: shredder.inner.get_assert(f).fact.value["kid"] for f in (gone, live)}
        material = keys.get(kids.values())
        ledger.forget(fact_id=gone, actor="a", reason="r")
        keys.doom({kids[live]: live})  # a forget that then failed: its key spared
        keys.spare([kids[live]])
        assert shredder.destroy_restored_keys() == {}
        keys.put({kids[gone]: material[kids[gone]]})  # the key store restored from before
        assert shredder.destroy_restored_keys(dry_run=True) == {gone: [kids[gone]]}
        assert kids[gone] in keys.get([kids[gone]])
        assert shredder.destroy_restored_keys() == {gone: [kids[gone]]}
        assert keys.get(kids.values()).keys() == {kids[live]}
        assert ledger.get(live).value == "live"


def test_a_forged_log_line_never_destroys_a_live_values_key(
    folder: Folder, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """The erasure log is not signed: a line naming the forgotten fact with the kept fact's key
    id (forged, or damaged) must not have a live value's key destroyed by ``repair``."""
    with folder.open() as ledger:
        kept_kid = json.loads(folder.ledger.read_text().splitlines()[1])["fact"]["value"]["kid"]
        assert ledger.get(folder.kept).value == KEPT
    log = folder.live / "l.jsonl.shredded"
    with log.open("a") as out:
        out.write("\n" + json.dumps({"factId": folder.gone, "keyIds": [kept_kid]}))
    cli(
        capsys,
        "repair",
        "--ledger",
        str(folder.ledger),
        "--forget-mode",
        "crypto-shred",
        "--key-store",
        str(folder.keys),
    )
    assert "kept" in caplog.text and kept_kid in caplog.text
    with folder.open() as ledger:
        assert ledger.get(folder.kept).value == KEPT  # its key is still there

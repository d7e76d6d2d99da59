"""``certificate reapply DIR``: erasures re-applied after a restore from backup (docs/forget.md,
"After a restore from backup").

Each test makes a JSONL ledger, copies it as the "backup", forgets with the certificate kept in
DIR (``Custody(certificates=DIR)``), restores the backup over the ledger (the forgotten value is
back) and re-applies the certificates: the value is gone again and the chain verifies; a forged
or tampered certificate is refused and never acted on; a fact held in the restored ledger is
reported, not forgotten; a dry run changes no byte.
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
from agent_custody_state.keys import load_key_pair
from agent_custody_state.server.signing import generate_key_pair
from agent_custody_state.signing import IN_TOTO_TYPE, pae
from agent_custody_state.stores.flows import Custody

SECRET = "restored.secret+value@example.org"
OTHER = "a second erased value, long enough"
KEPT = "kept.value@example.org"


class World:
    """A ledger folder (ledger and sidecars), its backup, DIR, a key and fact ids."""

    def __init__(self, root: Path, *, crypto: bool = False, no_digest: bool = False) -> None:
        self.root = root
        self.live = root / "live"
        self.live.mkdir()
        self.backup = root / "backup"
        self.certs = root / "certs"
        self.certs.mkdir()
        self.key, self.pub, _ = generate_key_pair(root / "k.key")
        self.ledger = self.live / "l.jsonl"
        self.mode: dict[str, Any] = (
            {"forget_mode": "crypto-shred", "key_store": str(self.live / "l.keys")}
            if crypto
            else {}
        )
        with Ledger(self.ledger, **self.mode) as ledger:
            self.ids = [
                ledger.assert_fact(
                    subject=f"u:{n}", predicate="email", value=v, space="org", actor="a"
                ).fact.fact_id
                for n, v in enumerate((SECRET, OTHER, KEPT))
            ]
        self.no_digest = no_digest

    def take_backup(self) -> None:
        shutil.copytree(self.live, self.backup)

    def forget(self, *fact_ids: str) -> None:
        with Ledger(self.ledger, **self.mode) as ledger:
            custody = Custody(ledger, certificates=self.certs, certificate_key=str(self.key))

            async def run() -> None:
                for fact_id in fact_ids:
                    await custody.forget(
                        fact_id=fact_id, actor="dpo", reason="gdpr", keep_digest=not self.no_digest
                    )

            anyio.run(run)

    def restore(self) -> None:
        shutil.rmtree(self.live)
        shutil.copytree(self.backup, self.live)

    def value(self, fact_id: str) -> Any:
        with Ledger(self.ledger, **self.mode) as ledger:
            fact = ledger.get(fact_id)
            assert fact is not None
            return fact.value

    def reapply(self, *more: str) -> list[str]:
        return [
            "certificate",
            "reapply",
            str(self.certs),
            "--ledger",
            str(self.ledger),
            "--key",
            str(self.pub),
            *more,
        ]

    def files(self) -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in sorted(self.live.iterdir()) if p.is_file()}


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = cli_main(list(args))
    out = capsys.readouterr()
    return code, out.out + out.err


def restored(tmp_path: Path, **kw: Any) -> World:
    world = World(tmp_path, **kw)
    world.take_backup()
    world.forget(world.ids[0], world.ids[1])
    world.restore()
    assert world.value(world.ids[0]) == SECRET  # the restore brought the value back
    return world


@pytest.mark.parametrize("crypto", [False, True], ids=["plain", "crypto-shred"])
def test_reapply_forgets_again_what_the_restore_brought_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], crypto: bool
) -> None:
    world = restored(tmp_path, crypto=crypto)
    code, out = cli(capsys, *world.reapply())
    assert code == 0, out
    assert world.value(world.ids[0]) is None and world.value(world.ids[1]) is None
    assert world.value(world.ids[2]) == KEPT
    assert f"forgot {world.ids[0]} (sha256 digest kept)" in out
    assert "reapply: forgot 2; 0 already forgotten" in out
    for name, data in world.files().items():  # no copy of the values left in the files
        assert SECRET.encode() not in data and OTHER.encode() not in data, name
    with Ledger(world.ledger, **world.mode) as ledger:
        [event] = [e for e in ledger.history(world.ids[0]) if e.kind == "forget"]
        assert event.actor == "agent-custody-memory"
        assert event.reason == (
            f"erasure re-applied after a restore (certificate {world.ids[0]}.json)"
        )
    assert cli(capsys, "verify", "--ledger", str(world.ledger))[0] == 0
    again, out = cli(capsys, *world.reapply("--json"))  # a second run: nothing left to do
    assert again == 0
    result = json.loads(out)
    assert result["forgotten"] == [] and len(result["alreadyForgotten"]) == 2


def test_reapply_keeps_no_digest_when_the_certificate_kept_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = restored(tmp_path, no_digest=True)
    code, out = cli(capsys, *world.reapply())
    assert code == 0, out
    with Ledger(world.ledger) as ledger:
        [event] = [e for e in ledger.history(world.ids[0]) if e.kind == "forget"]
        assert (event.digest_kind, event.value_digest) == ("none", None)


def test_a_tampered_or_forged_certificate_is_refused_and_not_acted_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = restored(tmp_path)
    good = world.certs / f"{world.ids[0]}.json"
    envelope = json.loads(good.read_text())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["subject"][0]["name"] = world.ids[2]  # retargeted at a fact never forgotten
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    (world.certs / "tampered.json").write_text(json.dumps(envelope))
    (world.certs / f"{world.ids[1]}.json").unlink()  # only the forged one names this fact
    statement["subject"][0]["name"] = world.ids[1]
    body = json.dumps(statement).encode()
    forger = load_key_pair(generate_key_pair(tmp_path / "forger.key")[0])  # not a trusted key
    sig = forger.private_key.sign(pae(IN_TOTO_TYPE, body))
    forged = {
        "payloadType": IN_TOTO_TYPE,
        "payload": base64.b64encode(body).decode(),
        "signatures": [{"keyid": forger.keyid, "sig": base64.b64encode(sig).decode()}],
    }
    (world.certs / "forged.json").write_text(json.dumps(forged))
    code, out = cli(capsys, *world.reapply())
    assert code == 1
    assert "FAILED: tampered.json" in out and "FAILED: forged.json" in out
    assert world.value(world.ids[2]) == KEPT  # never acted on
    assert world.value(world.ids[0]) is None  # the good certificate still acted on
    assert world.value(world.ids[1]) == OTHER  # its only certificate is forged
    assert "2 certificates refused" in out


def test_a_certificate_signed_by_another_key_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = restored(tmp_path)
    _, other_pub, _ = generate_key_pair(tmp_path / "other.key")
    args = world.reapply()
    args[args.index(str(world.pub))] = str(other_pub)
    code, out = cli(capsys, *args)
    assert code == 1 and "2 certificates refused" in out
    assert world.value(world.ids[0]) == SECRET


def test_a_fact_held_in_the_restored_ledger_is_reported_not_forgotten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = World(tmp_path)
    with Ledger(world.ledger) as ledger:
        ledger.hold(fact_id=world.ids[0], actor="legal", reason="litigation")
    world.take_backup()  # the backup holds the fact
    with Ledger(world.ledger) as ledger:
        ledger.release(fact_id=world.ids[0], actor="legal", reason="settled")
    world.forget(world.ids[0], world.ids[1])
    world.restore()
    code, out = cli(capsys, *world.reapply())
    assert code == 1
    assert f"kept {world.ids[0]}: on legal hold" in out
    assert world.value(world.ids[0]) == SECRET
    assert world.value(world.ids[1]) is None  # the others are still re-applied


def test_facts_the_backup_predates_are_counted_and_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = World(tmp_path)
    world.take_backup()
    with Ledger(world.ledger) as ledger:
        late = ledger.assert_fact(
            subject="u:9", predicate="email", value="late", space="org", actor="a"
        ).fact.fact_id
    world.forget(late)
    world.restore()
    code, out = cli(capsys, *world.reapply())
    assert code == 0, out
    assert "0 already forgotten; 1 not in this ledger" in out


def test_dry_run_changes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    world = restored(tmp_path)
    before = world.files()
    code, out = cli(capsys, *world.reapply("--dry-run"))
    assert code == 0, out
    assert f"would forget {world.ids[0]}" in out and "dry run: reapply: would forget 2" in out
    assert world.files() == before
    assert world.value(world.ids[0]) == SECRET


def test_an_hmac_digest_needs_the_forget_key_and_is_kept_as_hmac(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    world = World(tmp_path)
    world.take_backup()
    with Ledger(world.ledger, forget_key="k3y") as ledger:
        custody = Custody(ledger, certificates=world.certs, certificate_key=str(world.key))
        anyio.run(lambda: custody.forget(fact_id=world.ids[0], actor="dpo", reason="gdpr"))
    world.restore()
    before = world.files()
    code, out = cli(capsys, *world.reapply())  # no forget key: refused, nothing changed
    assert code == 1 and "HMAC digest" in out and "nothing was forgotten" in out
    assert world.files() == before
    monkeypatch.setenv("FORGET_KEY", "rotated")  # another key: another digest, refused
    code, out = cli(capsys, *world.reapply("--forget-key-env", "FORGET_KEY"))
    assert code == 1 and "not the one that made the certified" in out
    assert world.files() == before
    monkeypatch.setenv("FORGET_KEY", "k3y")
    code, out = cli(capsys, *world.reapply("--forget-key-env", "FORGET_KEY"))
    assert code == 0, out
    assert f"forgot {world.ids[0]} (hmac-sha256 digest kept)" in out


def test_a_certificate_of_another_ledger_is_not_acted_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = restored(tmp_path)
    with Ledger(tmp_path / "fresh.jsonl") as fresh:  # another ledger: another first event
        fresh.assert_fact(subject="x", predicate="p", value=1, space="org", actor="a")
    args = world.reapply()
    args[args.index(str(world.ledger))] = str(tmp_path / "fresh.jsonl")
    code, out = cli(capsys, *args)
    assert code == 1
    assert "0 not in this ledger" in out and "2 of another ledger" in out


@pytest.mark.parametrize("fail", [False, True], ids=["removed", "store-down"])
def test_the_config_stores_are_cleaned_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fail: bool
) -> None:
    world = World(tmp_path)
    with Ledger(world.ledger) as ledger:
        fact_id = ledger.assert_fact(
            subject="u:5", predicate="note", value=SECRET, space="org", actor="a",
            external={"mine": "m-1"},
        ).fact.fact_id  # fmt: skip
    world.take_backup()
    world.forget(fact_id)
    world.restore()
    config = tmp_path / "memory.toml"
    config.write_text(
        f'ledger = "{world.ledger}"\n[[stores]]\nname = "mine"\ntype = "memory"\n'
        f"fail = {'true' if fail else 'false'}\n"
    )
    args = world.reapply("--config", str(config))
    args.remove("--ledger")
    args.remove(str(world.ledger))
    code, out = cli(capsys, *args)
    assert world.value(fact_id) is None  # the ledger first, whatever the store says
    if fail:
        assert code == 1 and f"forgot {fact_id}" in out and "but still held by mine" in out
        assert "1 still held by a store" in out
    else:
        assert code == 0, out
        assert f"forgot {fact_id} (sha256 digest kept); removed from mine" in out


def test_crypto_shred_with_a_newer_key_store_records_the_erasure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only the ledger file restored: the key the forget destroyed stays destroyed, so the value
    cannot be read (nor digested); the erasure is recorded without a digest, and said so."""
    world = World(tmp_path, crypto=True)
    world.take_backup()
    world.forget(world.ids[0])
    shutil.copy(world.backup / "l.jsonl", world.ledger)  # the key store is not restored
    code, out = cli(capsys, *world.reapply())
    assert code == 0, out
    assert f"forgot {world.ids[0]} (none digest kept); its data key was already destroyed" in out
    with Ledger(world.ledger, **world.mode) as ledger:
        assert ledger.held(world.ids[0]) is False
        assert [e.kind for e in ledger.history(world.ids[0])] == ["assert", "forget"]
    assert cli(capsys, "verify", "--ledger", str(world.ledger))[0] == 0


def test_certificates_kept_by_the_sweep_command_are_reapplied(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = World(tmp_path)
    world.take_backup()
    sweep = ["sweep", "--ledger", str(world.ledger), "--before", "2999-01-01T00:00:00Z"]
    code, out = cli(
        capsys, *sweep, "--reason", "retention", "--certificates", str(world.certs),
        "--key", str(world.key),
    )  # fmt: skip
    assert code == 0, out
    world.restore()
    assert world.value(world.ids[2]) == KEPT
    code, out = cli(capsys, *world.reapply())
    assert code == 0, out
    assert "reapply: forgot 3;" in out
    assert all(world.value(fact_id) is None for fact_id in world.ids)


class Crash(BaseException):
    """The process dies here (nothing catches it, as nothing runs after ``kill -9``)."""


@pytest.mark.parametrize("command", ["forget", "reapply"])
def test_a_crash_at_the_store_removal_leaves_the_removal_owed_in_the_outbox(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], isolated_plugins: Any, command: str
) -> None:
    """``forget --config`` (which ``reapply`` follows) owes its store removals in the outbox, as
    ``sweep`` and the server do: a crash between the ledger's commit and the store's removal
    left the erased value in the store with no record of the debt for the next start."""
    from pydantic import BaseModel

    from agent_custody_state import hookimpl
    from agent_custody_state.stores.inprocess import InProcessStore
    from agent_custody_state.stores.outbox import Outbox

    class Crashing(InProcessStore):
        async def remove(self, external_id: str, fact: Any) -> None:
            raise Crash

    class Settings(BaseModel):
        pass

    class Plugin:
        @hookimpl
        def register_stores(self, register: Any) -> None:
            register("crashing", lambda settings, *, name: Crashing(name), settings=Settings)

    isolated_plugins.register_plugin(Plugin(), name="crashing-store")
    world = World(tmp_path)
    with Ledger(world.ledger) as ledger:
        fact_id = ledger.assert_fact(
            subject="u:5", predicate="note", value=SECRET, space="org", actor="a",
            external={"vectors": "v-1"},
        ).fact.fact_id  # fmt: skip
    config = tmp_path / "memory.toml"
    config.write_text(
        f'ledger = "{world.ledger}"\n[[stores]]\nname = "vectors"\ntype = "crashing"\n'
    )
    if command == "reapply":
        world.take_backup()
        world.forget(fact_id)
        world.restore()
        argv = world.reapply("--config", str(config))
    else:
        argv = ["forget", "--config", str(config), "--fact", fact_id, "--reason", "gdpr"]
    with pytest.raises(Crash):
        cli_main(argv)
    assert world.value(fact_id) is None  # the ledger committed
    owed = Outbox(world.live / "l.jsonl.outbox").pending()
    assert [(o.fact_id, o.store, o.operation) for o in owed] == [(fact_id, "vectors", "forget")]

"""Upgrading in place (ninth review): every JSONL file an earlier version of ours wrote still
opens, reads, verifies, forgets and certifies with today's code, or is refused saying what to do.

The fixtures in ``data/upgrade/<commit>`` were written once by that commit's code
(``data/upgrade/make.py`` says how and what each version could write): a ledger per forget mode
with asserts, a supersession, a hold, a retract, a forget and its certificate, a signed
checkpoint and, from the outbox on, a store removal owed by a process that died. A rolling
upgrade (an old process still appending while a new one does) is run live against an export of
the old code when the repository's history is at hand.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state import Ledger
from agent_custody_state.keys import load_public_key
from agent_custody_state.ledger.checkpoints import read_checkpoints
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.model import Fact
from agent_custody_state.ledger.verify import verify_lines
from agent_custody_state.stores import StoreSet, VerifyPolicy
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore
from agent_custody_state.stores.outbox import Outbox, outbox_path

DATA = Path(__file__).parent / "data" / "upgrade"
sys.path.insert(0, str(DATA))  # the shared helper beside the fixtures
from oldcode import ALL, cli, fixture, later, old_writer  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("commit", "mode"), ALL)
def test_an_old_ledger_reads_and_verifies_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], commit: str, mode: str
) -> None:
    folder, made = fixture(tmp_path, commit)
    info = made["ledgers"][mode]
    path = folder / info["ledger"]
    with Ledger(path, made["forget_key"], forget_mode=mode, read_only=True) as book:
        assert sorted(map(json.dumps, (f.value for f in book.as_of()))) == sorted(
            map(json.dumps, [{"tea": "green"}, "Ada", *later(info)])
        )
        assert [e.kind for e in book.history(info["first"])] == ["assert", "assert"]
        forgotten = book.get(info["forgotten"])
        assert forgotten is not None and forgotten.forgotten is not None
        assert forgotten.value is None
        assert book.held(info["held"]) and book.is_retracted(info["second"])
        report = verify_lines(book.backend.stored_events())
        assert report.ok, report.problems
    if commit == "1ce3520":
        code, out = cli(capsys, "verify", "--ledger", str(path))
        assert code == 0 and "chain not started" in out
        return
    log = path.parent / f"{path.name}.checkpoints"
    checkpoints = read_checkpoints(log.read_text())
    assert [c.size for c in checkpoints] == [info["checkpoint_size"]]
    with Ledger(path, read_only=True) as book:
        report = verify_lines(
            book.backend.stored_events(),
            checkpoints=checkpoints,
            public_key=load_public_key(folder / "key.pub"),
        )
    assert report.ok, report.problems
    for jobs in ("1", "2"):
        code, out = cli(
            capsys,
            "verify",
            "--ledger",
            str(path),
            "--key",
            str(folder / "key.pub"),
            "--jobs",
            jobs,
        )
        assert code == 0, out
        assert "1 checkpoint(s) (signatures verified)" in out


@pytest.mark.parametrize(("commit", "mode"), ALL)
def test_today_writes_and_forgets_in_an_old_ledger_and_the_old_proofs_still_hold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], commit: str, mode: str
) -> None:
    folder, made = fixture(tmp_path, commit)
    info = made["ledgers"][mode]
    path, pub = folder / info["ledger"], str(folder / "key.pub")
    with Ledger(path, made["forget_key"], forget_mode=mode) as book:
        new = book.assert_fact(subject="user:9", predicate="p", value="today", space="s", actor="a")
        book.forget(fact_id=info["first"], actor="dpo", reason="erasure")
        book.forget(fact_id=new.fact_id, actor="dpo", reason="erasure")
        assert [f.value for f in book.as_of()] == ["Ada", *later(info)]
    args = ["verify", "--ledger", str(path)] + (["--key", pub] if commit != "1ce3520" else [])
    code, out = cli(capsys, *args)
    assert code == 0, out
    if info["certificate"]:
        cert = str(folder / info["certificate"])
        code, out = cli(capsys, "certificate", "verify", cert, "--key", pub, "--ledger", str(path))
        assert code == 0, out
        assert "fact forgotten" in out and ("Purge" if mode != "plain" else "Clear") in out


class Mem(InProcessStore):
    """The reference store, counting what it is asked to remove."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.removed: list[str] = []

    async def remove(self, external_id: str, fact: Fact) -> None:
        self.removed.append(external_id)
        await super().remove(external_id, fact)


@pytest.mark.parametrize("mode", ["plain", "crypto-shred"])
def test_an_old_outbox_entry_is_finished_at_the_next_start(tmp_path: Path, mode: str) -> None:
    folder, made = fixture(tmp_path, "29a8e2e")
    info = made["ledgers"][mode]
    path = str(folder / info["ledger"])
    box = outbox_path(path, None)
    assert box is not None and box.name == info["outbox"]
    [owed] = Outbox(box).pending()
    assert (owed.fact_id, owed.store, owed.external_id) == (info["later"], "mem", "m-4")
    mem = Mem("mem")

    async def start() -> Any:
        with Ledger(path, made["forget_key"], forget_mode=mode) as book:
            return await Custody(book, StoreSet([mem], VerifyPolicy(1, 0)), outbox=box).resume()

    done = anyio.run(start)
    assert mem.removed == ["m-4"]
    assert info["later"] in done.finished
    assert Outbox(box).pending() == []


def test_a_crypto_shred_ledger_from_before_the_mark_refuses_plain_values(tmp_path: Path) -> None:
    """af8a474 recorded no forget mode, and its key store was elsewhere (docs/forget.md advises
    another volume): nothing beside the file said crypto-shred, and a plain writer stored its
    values unencrypted beside the sealed ones. Its sealed newest value says it now."""
    folder, made = fixture(tmp_path, "af8a474")
    info = made["ledgers"]["crypto-shred"]["elsewhere"]
    path, store = folder / info["ledger"], str(folder / info["key_store"])
    before = path.read_bytes()
    with Ledger(path, made["forget_key"]) as book:
        with pytest.raises(LedgerError, match="before the mark") as refused:
            book.assert_fact(subject="u", predicate="p", value="clear", space="s", actor="a")
        assert refused.value.code == "crypto_shred"
        with pytest.raises(LedgerError, match="before the mark"):
            book.assert_many([{"subject": "u", "predicate": "p", "value": 1, "space": "s"}])
    assert path.read_bytes() == before
    with Ledger(path, made["forget_key"], forget_mode="crypto-shred", key_store=store) as book:
        assert [f.value for f in book.as_of()] == ["4711"]
    assert json.loads((folder / f"{path.name}.mode").read_text())["key_store"] == store
    with Ledger(path, made["forget_key"]) as book, pytest.raises(LedgerError, match=store):
        book.assert_fact(subject="u", predicate="p", value="clear", space="s", actor="a")


def test_a_plain_ledger_whose_newest_value_is_plain_takes_plain_values(tmp_path: Path) -> None:
    """The inference reads the newest value only: an old plain ledger is never refused."""
    folder, made = fixture(tmp_path, "af8a474")
    with Ledger(folder / "plain.jsonl", made["forget_key"]) as book:
        book.assert_fact(subject="u", predicate="p", value="clear", space="s", actor="a")


def rolling(tmp_path: Path, commit: str, path: Path, mode: str, key: Path) -> list[str]:
    """An old process and today's appending in turns on one ledger (a rolling upgrade: the old
    server still running while a new one writes), both forgetting and signing checkpoints."""
    with old_writer(tmp_path, commit, path, mode, key) as ask:
        ids = [ask(op="assert", subject="o", value="old-0")]
        with Ledger(path, "k", forget_mode=mode, checkpoint_key=str(key)) as book:
            for i in range(3):
                new = book.assert_fact(subject="n", predicate="p", value=i, space="s", actor="new")
                ids += [new.fact_id, ask(op="assert", subject="o", value=f"old-{i + 1}")]
            ask(op="checkpoint")
            ask(op="forget", fact_id=ids[1])
            book.forget(fact_id=ids[0], actor="new", reason="r")
            # At another size than the old writer's: two checkpoints of one size signed in the
            # same millisecond are one note (the log keeps it once), as a quick CI run showed.
            book.checkpoint()
            ids.append(ask(op="assert", subject="o", value="old-last"))
            book.assert_fact(subject="n", predicate="p", value="new-last", space="s", actor="new")
            return sorted(json.dumps(f.value) for f in book.as_of())


@pytest.mark.parametrize(("commit", "mode"), [("af8a474", "crypto-shred"), ("29a8e2e", "plain")])
def test_old_and_new_writers_in_turns_keep_one_chain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], commit: str, mode: str
) -> None:
    path = tmp_path / "turns.jsonl"
    key = tmp_path / "key.pem"  # made here: no private key is kept in the repository
    code, out = cli(capsys, "keygen", "--out", str(key))
    assert code == 0, out
    values = rolling(tmp_path, commit, path, mode, key)
    expected = [1, 2, "old-1", "old-2", "old-3", "old-last", "new-last"]
    assert values == sorted(json.dumps(v) for v in expected)
    pub = str(tmp_path / "key.pem.pub")
    code, out = cli(capsys, "verify", "--ledger", str(path), "--key", pub)
    assert code == 0, out
    assert "11 events" in out and "2 checkpoint(s) (signatures verified)" in out


def test_a_read_of_an_unmarked_sealed_ledger_names_its_key_store_instead_of_envelopes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ``facts`` printed the envelopes as the values, without a word."""
    shutil.copy(DATA / "af8a474" / "elsewhere.jsonl", tmp_path / "elsewhere.jsonl")
    shutil.copytree(DATA / "af8a474" / "vault", tmp_path / "vault")
    ledger = str(tmp_path / "elsewhere.jsonl")
    before = sorted(p.name for p in tmp_path.iterdir())
    code, out = cli(capsys, "facts", "--ledger", ledger, "--json")
    assert code == 1 and "records no mode" in out and "--key-store LOCATION" in out, out
    code, out = cli(capsys, "facts", "--ledger", ledger, "--json", "--forget-mode",
                    "crypto-shred", "--key-store", str(tmp_path / "vault" / "elsewhere.keys"))  # fmt: skip
    assert code == 0 and json.loads(out)["facts"][0]["value"] == "4711", out
    code, out = cli(capsys, "facts", "--ledger", ledger, "--json", "--forget-mode", "plain")
    assert code == 0 and "kid" in json.loads(out)["facts"][0]["value"], out
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # reads changed no file

"""Upgrading in place (ninth review), SQLite: every ledger an earlier version of ours wrote
opens, reads, verifies, forgets and certifies with today's code, or is refused saying what to do.

The fixtures are ``core/tests/data/upgrade/<commit>-sqlite``, written once by that commit's
code (``core/tests/data/upgrade/make.py``). A rolling upgrade (an old process appending while
today's does) is run live against an export of the old code when the history is at hand.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.verify import verify_lines
from agent_custody_state.stores import StoreSet, VerifyPolicy
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore
from agent_custody_state.stores.outbox import Outbox, outbox_path

REPO = Path(__file__).resolve().parents[3]
DATA = REPO / "core" / "tests" / "data" / "upgrade"
sys.path.insert(0, str(DATA))  # the shared helper beside the fixtures
from oldcode import ALL, cli, later, old_writer  # noqa: E402
from oldcode import fixture as fixture_of  # noqa: E402


def verify_args(folder: Path, path: Path, commit: str) -> list[str]:
    """``verify`` of an old ledger with its key and, where the version kept its checkpoints in a
    file it was given (af8a474's crypto-shred ledgers), that file."""
    if commit == "1ce3520":
        return ["verify", "--ledger", str(path)]
    args = ["verify", "--ledger", str(path), "--key", str(folder / "key.pub")]
    named = path.parent / f"{path.name}.checkpoints"
    return args + (["--checkpoint", str(named)] if named.exists() else [])


@pytest.mark.parametrize(("commit", "mode"), ALL)
def test_an_old_sqlite_ledger_reads_verifies_and_forgets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], commit: str, mode: str
) -> None:
    folder, made = fixture_of(tmp_path, commit, sqlite=True)
    info = made["ledgers"][mode]
    path = folder / info["ledger"]
    with Ledger(path, made["forget_key"], forget_mode=mode, read_only=True) as book:
        values = sorted(json.dumps(f.value) for f in book.as_of())
        assert values == sorted(json.dumps(v) for v in [{"tea": "green"}, "Ada", *later(info)])
        assert [e.kind for e in book.history(info["forgotten"])] == ["assert", "forget"]
        assert book.held(info["held"]) and book.is_retracted(info["second"])
        assert verify_lines(book.backend.stored_events()).ok
    code, out = cli(capsys, *verify_args(folder, path, commit))
    assert code == 0, out
    if commit != "1ce3520":
        assert "1 checkpoint(s) (signatures verified)" in out
    with Ledger(path, made["forget_key"], forget_mode=mode) as book:
        new = book.assert_fact(subject="user:9", predicate="p", value="today", space="s", actor="a")
        book.forget(fact_id=info["first"], actor="dpo", reason="erasure")
        book.forget(fact_id=new.fact_id, actor="dpo", reason="erasure")
        assert [f.value for f in book.as_of()] == ["Ada", *later(info)]
    code, out = cli(capsys, *verify_args(folder, path, commit), "--jobs", "2")
    assert code == 0, out
    if info["certificate"]:
        cert, pub = str(folder / info["certificate"]), str(folder / "key.pub")
        code, out = cli(capsys, "certificate", "verify", cert, "--key", pub, "--ledger", str(path))
        assert code == 0 and "fact forgotten" in out, out


@pytest.mark.parametrize("mode", ["plain", "crypto-shred"])
def test_an_old_outbox_entry_is_finished_at_the_next_start(tmp_path: Path, mode: str) -> None:
    folder, made = fixture_of(tmp_path, "29a8e2e", sqlite=True)
    info = made["ledgers"][mode]
    path = str(folder / info["ledger"])
    box = outbox_path(path, None)
    assert box is not None and [o.external_id for o in Outbox(box).pending()] == ["m-4"]
    mem = InProcessStore("mem")

    async def start() -> Any:
        with Ledger(path, made["forget_key"], forget_mode=mode) as book:
            return await Custody(book, StoreSet([mem], VerifyPolicy(1, 0)), outbox=box).resume()

    done = anyio.run(start)
    assert list(done.finished) == [info["later"]]
    assert Outbox(box).pending() == []


def test_a_crypto_shred_ledger_from_before_the_mark_refuses_plain_values(tmp_path: Path) -> None:
    """af8a474 recorded no forget mode and its key store was elsewhere: a plain writer stored
    values unencrypted beside the sealed ones. The sealed newest value refuses it now, and a
    crypto-shred open records the mode in the settings table."""
    folder, made = fixture_of(tmp_path, "af8a474", sqlite=True)
    info = made["ledgers"]["crypto-shred"]["elsewhere"]
    path, store = folder / info["ledger"], str(folder / info["key_store"])
    before = path.read_bytes()
    with Ledger(path, made["forget_key"]) as book:
        with pytest.raises(LedgerError, match="before the mark") as refused:
            book.assert_fact(subject="u", predicate="p", value="clear", space="s", actor="a")
        assert refused.value.code == "crypto_shred"
    assert path.read_bytes() == before
    with Ledger(path, made["forget_key"], forget_mode="crypto-shred", key_store=store) as book:
        assert [f.value for f in book.as_of()] == ["4711"]
    with Ledger(path, made["forget_key"]) as book, pytest.raises(LedgerError, match=store):
        book.assert_fact(subject="u", predicate="p", value="clear", space="s", actor="a")


@pytest.mark.parametrize(("commit", "mode"), [("af8a474", "plain"), ("29a8e2e", "crypto-shred")])
def test_old_and_new_writers_in_turns_keep_one_chain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], commit: str, mode: str
) -> None:
    """A rolling upgrade: the old server still appends (its chain head remembered across its
    own commits) while today's appends and forgets on the same SQLite file."""
    path = tmp_path / "turns.sqlite"
    with old_writer(tmp_path, commit, path, mode) as ask:
        ids = [ask(op="assert", value="old-0")]
        with Ledger(path, "k", forget_mode=mode) as book:
            for i in range(3):
                new = book.assert_fact(subject="n", predicate="p", value=i, space="s", actor="new")
                ids += [new.fact_id, ask(op="assert", value=f"old-{i + 1}")]
            ask(op="forget", fact_id=ids[1])
            book.forget(fact_id=ids[0], actor="new", reason="r")
            ask(op="assert", value="old-last")
            book.assert_fact(subject="n", predicate="p", value="new-last", space="s", actor="new")
            values = sorted(json.dumps(f.value) for f in book.as_of())
    expected = [1, 2, "old-1", "old-2", "old-3", "old-last", "new-last"]
    assert values == sorted(json.dumps(v) for v in expected)
    code, out = cli(capsys, "verify", "--ledger", str(path))
    assert code == 0 and "11 events" in out, out

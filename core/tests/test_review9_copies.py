"""A copy of a crypto-shred ledger's folder uses its own key store (ninth review).

The mode mark records the key store by the path its writer used. A copy of the folder (a
staging copy, a restored backup beside the original) carried the original's path: a forget
through the command line on the copy destroyed the fact's key in the ORIGINAL's key store (the
original then read the value as erased with no forget event, and its ``verify`` failed) and left
the key in the copy's own store, where the value could still be opened. A key store of the
ledger's default name beside the copy is the copy's own, as a Python writer already took it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agent_custody_state import Ledger
from agent_custody_state.backends.keystore_file import FileKeyStore
from agent_custody_state.cli import main

SECRET = "gus.copy+secret@example.org"


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def kid_in(path: Path) -> str:
    """The key id sealing the one value written to the ledger at ``path``."""
    for line in path.read_text().splitlines():
        value = json.loads(line).get("fact", {}).get("value")
        if isinstance(value, dict) and "kid" in value:
            return str(value["kid"])
    raise AssertionError("no sealed value")


def test_a_forget_on_a_copy_reaches_the_copys_keys_not_the_originals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original, copy = tmp_path / "orig", tmp_path / "copy"
    original.mkdir()
    with Ledger(original / "l.jsonl", forget_mode="crypto-shred") as ledger:
        fact = ledger.assert_fact(subject="s", predicate="p", value=SECRET, space="o", actor="a")
    fact_id, kid = fact.fact.fact_id, kid_in(original / "l.jsonl")
    shutil.copytree(original, copy)
    before = {p.name: p.read_bytes() for p in original.iterdir()}

    code, out = cli(capsys, "forget", "--ledger", str(copy / "l.jsonl"), "--fact", fact_id,
                    "--reason", "erasure on the copy")  # fmt: skip
    assert code == 0, out

    assert {p.name: p.read_bytes() for p in original.iterdir()} == before  # untouched
    code, out = cli(capsys, "facts", "--ledger", str(original / "l.jsonl"), "--json")
    assert code == 0 and json.loads(out)["facts"][0]["value"] == SECRET, out
    code, out = cli(capsys, "verify", "--ledger", str(original / "l.jsonl"))
    assert code == 0, out
    copied_keys = FileKeyStore(str(copy / "l.jsonl.keys"))
    try:
        assert copied_keys.get([kid]) == {}  # the copy's key is the one destroyed
    finally:
        copied_keys.close()
    code, out = cli(capsys, "verify", "--ledger", str(copy / "l.jsonl"))
    assert code == 0, out


def test_a_moved_ledger_still_finds_its_keys_and_a_key_store_kept_elsewhere_is_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (tmp_path / "a").mkdir()
    path = tmp_path / "a" / "l.jsonl"
    with Ledger(path, forget_mode="crypto-shred", key_store=str(vault / "k.keys")) as ledger:
        ledger.assert_fact(subject="s", predicate="p", value=SECRET, space="o", actor="a")
    moved = tmp_path / "b"
    shutil.move(tmp_path / "a", moved)
    code, out = cli(capsys, "facts", "--ledger", str(moved / "l.jsonl"), "--json")
    assert code == 0 and json.loads(out)["facts"][0]["value"] == SECRET, out

"""Two ledgers sharing one crypto-shred key store: opening one never settles the other's
forget. A forget dooms its fact's key before its event commits (``keystore``); whoever opens a
ledger next settles the doomed keys (``shred.recover``). A doomed key whose fact the opening
ledger does not hold is the other ledger's, whose forget may still be under way."""

from __future__ import annotations

import json
from pathlib import Path

from agent_custody_state import Ledger


def test_opening_a_ledger_leaves_the_other_ledgers_doomed_keys(tmp_path: Path) -> None:
    keys = str(tmp_path / "shared.keys")
    with Ledger(tmp_path / "a.jsonl", forget_mode="crypto-shred", key_store=keys) as a:
        fact = a.assert_fact(subject="s", predicate="p", value="live", space="o", actor="x")
        first = (tmp_path / "a.jsonl").read_text(encoding="utf-8").splitlines()[0]
        kid = json.loads(first)["fact"]["value"]["kid"]
        a.backend.keys.doom({kid: fact.fact_id})  # a's forget is half-way: not committed yet
        with Ledger(tmp_path / "b.jsonl", forget_mode="crypto-shred", key_store=keys) as b:
            b.assert_fact(subject="t", predicate="p", value="b's", space="o", actor="x")
            assert a.backend.keys.doomed() == {kid: fact.fact_id}  # b left it alone
        a.backend.keys.spare([kid])  # a's forget did not happen after all
        again = a.get(fact.fact_id)
        assert again is not None and again.value == "live"
    with Ledger(tmp_path / "a.jsonl", forget_mode="crypto-shred", key_store=keys) as a:
        assert [f.value for f in a.as_of()] == ["live"]


def test_a_ledger_still_settles_its_own_interrupted_forget(tmp_path: Path) -> None:
    keys = str(tmp_path / "k.keys")
    path = tmp_path / "a.jsonl"
    with Ledger(path, forget_mode="crypto-shred", key_store=keys) as a:
        kept = a.assert_fact(subject="s", predicate="p", value="kept", space="o", actor="x")
        first = path.read_text(encoding="utf-8").splitlines()[0]
        kid = json.loads(first)["fact"]["value"]["kid"]
        a.backend.keys.doom({kid: kept.fact_id})  # a crash before the forget committed
    with Ledger(path, forget_mode="crypto-shred", key_store=keys) as a:
        assert a.backend.keys.doomed() == {}  # spared: the fact is live
        again = a.get(kept.fact_id)
        assert again is not None and again.value == "kept"

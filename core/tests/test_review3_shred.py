"""Third review of crypto-shred mode: a key pool inherited by a forked process.

A ``KeyPool`` holds keys created ahead (durable in the key store), each with the nonce of its
one encryption. A process forked after a crypto-shred ledger was used inherited that list: the
parent and the child then sealed two different facts with the same key and nonce (AES-GCM with
a repeated nonce leaks the XOR of the plaintexts and lets the tag be forged; forgetting one fact
destroyed the other's key), and a child closing the ledger destroyed the parent's unused keys,
so the parent's next facts were sealed with keys no longer in the key store.
"""

from __future__ import annotations

import faulthandler
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def _in_child(work: Callable[[], object]) -> None:
    """Run ``work()`` in a forked child; fail if it failed. The fork waits for the threads that
    write blocks of keys: forking while one runs inside the key store or OpenSSL may copy a lock
    it holds into the child (a hazard of any fork of a process with threads, not tested here)."""
    for thread in threading.enumerate():
        if thread.name == "acs-key-refill":
            thread.join()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        code = 1
        faulthandler.dump_traceback_later(60, exit=True)  # a hung child fails, never hangs
        try:
            work()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def _envelopes(path: Path) -> dict[str, tuple[str, str]]:
    out = {}
    for line in path.read_text("utf-8").splitlines():
        fact = json.loads(line)["fact"]
        out[fact["subject"]] = (fact["value"]["kid"], fact["value"]["iv"])
    return out


def test_a_forked_process_never_reuses_its_parents_keys_and_nonces(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    with Ledger(path, forget_mode="crypto-shred") as ledger:
        ledger.assert_fact(subject="first", predicate="p", value="v", space="o", actor="a")

        def child() -> None:
            ledger.assert_fact(subject="child", predicate="p", value="c", space="o", actor="a")

        _in_child(child)
        ledger.assert_fact(subject="parent", predicate="p", value="p", space="o", actor="a")
    sealed = _envelopes(path)
    assert len({kid for kid, _ in sealed.values()}) == 3
    assert len({iv for _, iv in sealed.values()}) == 3
    with Ledger(path, forget_mode="crypto-shred") as ledger:
        child_fact = ledger.as_of(subject="child")[0]
        ledger.forget(fact_id=child_fact.fact_id, actor="a", reason="gdpr")
        assert [f.value for f in ledger.as_of(subject="parent")] == ["p"]  # its key survives
    assert main(["verify", "--ledger", str(path)]) == 0


def test_a_forked_process_closing_the_ledger_leaves_the_parents_keys(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    with Ledger(path, forget_mode="crypto-shred") as ledger:
        ledger.assert_fact(subject="first", predicate="p", value="v", space="o", actor="a")
        _in_child(ledger.close)  # releases the unused keys it holds: none of the parent's
        ledger.assert_fact(subject="parent", predicate="p", value="p", space="o", actor="a")
    with Ledger(path, forget_mode="crypto-shred") as ledger:
        assert [f.value for f in ledger.as_of(subject="parent")] == ["p"]


def test_a_key_store_file_made_beforehand_is_made_private(tmp_path: Path) -> None:
    """A key store is created mode 0600, but a file made beforehand (``touch``, a deployment
    script) kept its mode, 0644 here: every key readable by every local user. The file a new
    key store is set up in is made private."""
    keys = tmp_path / "k.keys"
    keys.touch(mode=0o644)
    keys.chmod(0o644)
    with Ledger(tmp_path / "l.jsonl", forget_mode="crypto-shred", key_store=str(keys)) as ledger:
        ledger.assert_fact(subject="s", predicate="p", value="v", space="o", actor="a")
    assert keys.stat().st_mode & 0o777 == 0o600

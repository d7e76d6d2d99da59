"""A mistyped ``AGENT_CUSTODY_*`` variable stops the config loader instead of being ignored."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agent_custody_state.config import ConfigError, load_config
from agent_custody_state.envnames import near_misses


def test_a_typo_of_a_setting_is_named_with_the_setting_it_resembles() -> None:
    environ = {
        "AGENT_CUSTODY_FORGET_MODES": "crypto-shred",
        "AGENT_CUSTODY_LEDGR": "x.jsonl",
        "AGENT_CUSTODY_KEY_STORES": "k",
        "AGENT_CUSTODY_LEDGER": "right.jsonl",  # a setting: fine
        "AGENT_CUSTODY_SERVER__PROT": "1",  # under a table: the table's model refuses it
        "AGENT_CUSTODY_STRESS": "1",  # a test knob, read elsewhere
        "AGENT_CUSTODY_JSONL_MAX_MB": "0",  # read by the JSONL backend
        "AGENT_CUSTODY_WHATEVER_ELSE": "1",  # resembles no setting: not ours to judge
        "OTHER_FORGET_MODES": "x",
    }
    fields = ["ledger", "forget_mode", "key_store", "stores", "server"]
    assert near_misses("AGENT_CUSTODY_", fields, environ) == [
        ("AGENT_CUSTODY_FORGET_MODES", "AGENT_CUSTODY_FORGET_MODE"),
        ("AGENT_CUSTODY_KEY_STORES", "AGENT_CUSTODY_KEY_STORE"),
        ("AGENT_CUSTODY_LEDGR", "AGENT_CUSTODY_LEDGER"),
    ]


def test_load_config_refuses_a_mistyped_forget_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_CUSTODY_FORGET_MODES", "crypto-shred")
    with pytest.raises(ConfigError) as caught:
        load_config(ledger="x.jsonl")
    assert str(caught.value) == (
        "AGENT_CUSTODY_FORGET_MODES: not a setting (did you mean AGENT_CUSTODY_FORGET_MODE?)"
    )
    monkeypatch.delenv("AGENT_CUSTODY_FORGET_MODES")
    monkeypatch.setenv("AGENT_CUSTODY_FORGET_MODE", "crypto-shred")
    assert load_config(ledger="x.jsonl").forget_mode == "crypto-shred"


def test_serve_exits_1_naming_the_variable_before_it_starts(tmp_path: Path) -> None:
    env = {"PATH": "", "AGENT_CUSTODY_LEDGR": str(tmp_path / "l.jsonl")}
    done = subprocess.run(
        [sys.executable, "-m", "agent_custody_state", "serve", "--http", "--port", "0"],
        env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "error: AGENT_CUSTODY_LEDGR: not a setting (did you mean AGENT_CUSTODY_LEDGER?)"
    )
    assert list(tmp_path.iterdir()) == []  # nothing created

"""``agent-custody-memory demo`` and the stdio startup line."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from servertest import CLI, run_cli


def test_demo_runs_the_whole_tour() -> None:
    done = run_cli("demo", "--color", "always", timeout=120)
    assert done.returncode == 0, done.stderr
    assert "\033[1;36m1. " in done.stdout
    out = re.sub(r"\033\[[0-9;]*m", "", done.stdout)
    for expected in (
        "attested",
        "claimed",
        "is on legal hold",
        "confirmation must come through the receipts gateway",
        "accepts calls only through the receipts gateway",
        "erased; sha256 digest",
        'plan="pro" (attested)',
        "retracted=True",
        "stores: vectors",
        'mirror of the superseded fact: {"vectors": "verified"}',
        "signature verified: memory.read",
        'stores: {"vectors": "verified"}',
        "the chain verifies from genesis, forget included",
    ):
        assert expected in out, expected
    assert "assert, assert, assert, confirm, retract, hold, release, forget" in out
    # The bitemporal step reads "pro" as of the first write's transaction time.
    bitemporal = out.split("A bitemporal read")[1].split("\n\n")[0]
    assert 'plan="pro" (attested)' in bitemporal and "txAt" in bitemporal


def test_demo_next_steps_run_as_printed() -> None:
    """The closing hints of ``demo --keep`` are commands that run as printed."""
    done = run_cli("demo", "--keep", "--color", "never", timeout=120)
    assert done.returncode == 0, done.stderr
    hints = [
        line.strip().split("  #")[0].strip()
        for line in done.stdout.split("next steps")[1].splitlines()[1:]
        if line.strip().startswith("agent-custody-memory")
    ]
    assert len(hints) >= 4, hints
    folder = None
    try:
        for hint in hints:
            words = shlex.split(hint)
            assert words[0] == "agent-custody-memory"
            if "--ledger" in words:
                folder = Path(words[words.index("--ledger") + 1]).parent
            ran = run_cli(*words[1:], timeout=60)
            assert ran.returncode == 0, (hint, ran.stderr)
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def test_stdio_startup_line_and_forget_key_warning(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    env = {**os.environ, "FK": "k3y"}
    quiet = subprocess.run(
        [*CLI, "serve", "--ledger", str(ledger), "--forget-key-env", "FK"],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert quiet.returncode == 0
    assert quiet.stderr == (
        f"agent-custody-memory: ledger {ledger} (jsonl, 0 events); serving "
        "stdio; trust: the spawning process is the gateway; calls without a "
        "receipt are refused\n"
    )
    assert quiet.stdout == ""
    loud = subprocess.run(
        [*CLI, "serve", "--ledger", str(ledger), "--allow-direct"],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = loud.stderr.splitlines()
    assert lines[0].endswith("direct calls admitted as claimed (quarantined)")
    assert lines[1].startswith("agent-custody-memory: warning: no forget key")


def test_stdio_startup_line_names_crypto_shred(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    done = subprocess.run(
        [*CLI, "serve", "--ledger", str(ledger), "--forget-mode", "crypto-shred"],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert f"; forget: crypto-shred (keys {ledger}.keys)" in done.stderr.splitlines()[0]
    assert (tmp_path / "l.jsonl.keys").exists()


def _serve(*args: str) -> str:
    done = subprocess.run(
        [*CLI, "serve", *args], input="", capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stderr.splitlines()[0]


def test_the_startup_line_warns_of_a_forget_mode_the_ledger_does_not_record(
    tmp_path: Path,
) -> None:
    """The mode recorded with the ledger (``modemark``) against the server's: a plain server on
    a crypto-shred ledger, and a crypto-shred server with another key store than the ledger's."""
    ledger, vault, other = tmp_path / "l.jsonl", tmp_path / "vault.keys", tmp_path / "other.keys"
    sealed = _serve(
        "--ledger", str(ledger), "--forget-mode", "crypto-shred", "--key-store", str(vault)
    )
    assert "warning" not in sealed
    plain = _serve("--ledger", str(ledger))
    assert (
        f"warning: the ledger is written in crypto-shred mode (keys {vault}) and this server is "
        "not: it will refuse to write values" in plain
    )
    split = _serve(
        "--ledger", str(ledger), "--forget-mode", "crypto-shred", "--key-store", str(other)
    )
    assert f"warning: the ledger records its keys in {vault}, this server uses {other}" in split

"""The twelfth review, served: a certificate a kill lost after its forget (the process
SIGKILLed where ``CertificateArchive.keep`` would write, ``test_review12_certs``) is issued by
the next ``serve`` over the same ``certificates`` folder, before its first call is answered,
and verifies against the ledger."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from servertest import run_cli, write

from agent_custody_state import Ledger
from agent_custody_state_conformance.gateway import GatewayClient

pytestmark = pytest.mark.anyio

sys.path.insert(0, str(Path(__file__).parent.parent))
from test_review12_certs import KILLED, intents_in, predicate  # noqa: E402


async def test_the_next_serve_issues_a_certificate_a_kill_lost(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    ledger, folder = tmp_path / "ledger.jsonl", tmp_path / "certs"
    folder.mkdir()
    with Ledger(ledger) as book:
        fact = book.assert_fact(
            subject="s", predicate="p", value="served.secret@example.org", space="org", actor="a"
        ).fact.fact_id
    args = [str(ledger), str(folder), str(keys[0]), "forget", fact]
    done = subprocess.run([sys.executable, "-c", KILLED, *args], capture_output=True, timeout=60)
    assert done.returncode == -9, done.stderr
    assert list(folder.glob("*.json")) == []  # lost, before this fix
    async with GatewayClient.stdio(
        "serve", "--ledger", str(ledger), "--key", str(keys[0]), "--certificates", str(folder)
    ) as gw:
        await write(gw)  # answered after the start's work
        [kept] = list(folder.glob("*.json"))
    verify = run_cli(
        "certificate", "verify", str(kept), "--key", str(keys[1]), "--ledger", str(ledger)
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "outcome partial" in verify.stdout
    assert predicate(kept)["recovered"]["intentAt"] <= predicate(kept)["recovered"]["issuedAt"]
    assert intents_in(folder) == []

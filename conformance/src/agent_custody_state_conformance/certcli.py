"""The command line's erasure certificate, end to end, for any ledger location (a plugin test).

``forget_and_verify(location, folder)`` writes a fact to forget and one to keep (in
crypto-shred mode, by default), runs ``agent-custody-memory forget ... --certificate FILE --key
K`` and ``certificate verify FILE --key PUB --ledger LOCATION`` as a user would, each in a
subprocess, and checks that a ledger that is not the certificate's fails the same verification.
It returns the certificate's predicate for the caller's backend-specific checks.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from agent_custody_state import Ledger

__all__ = ["forget_and_verify", "memory_command"]

SECRET = "certcli-probe: erin.private@example.org"


def memory_command(*args: Any) -> subprocess.CompletedProcess[str]:
    """``agent-custody-memory ARGS`` (``python -m agent_custody_state``)."""
    return subprocess.run(
        [sys.executable, "-m", "agent_custody_state", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _write(location: str, mode: str, value: Any, subject: str) -> str:
    with Ledger(location, forget_mode=mode) as ledger:
        event = ledger.assert_fact(
            subject=subject, predicate="email", value=value, space="org", actor="a"
        )
    return event.fact.fact_id


def forget_and_verify(
    location: str, folder: Path, *, other: str, forget_mode: str = "crypto-shred"
) -> dict[str, Any]:
    """Forget with a certificate by the command line and verify it against ``location`` (it
    passes) and against ``other``, another ledger of the same kind (it fails)."""
    keygen = memory_command("keygen", "--out", folder / "memory.key")
    assert keygen.returncode == 0, keygen.stderr
    key, public, cert = folder / "memory.key", folder / "memory.key.pub", folder / "erasure.json"
    fact = _write(location, forget_mode, SECRET, "acct:1")
    _write(location, forget_mode, "kept", "acct:2")
    _write(other, forget_mode, "elsewhere", "acct:3")
    mode = ("--forget-mode", forget_mode)
    done = memory_command(
        "forget", "--ledger", location, "--fact", fact, "--reason", "erasure request",
        "--certificate", cert, "--key", key, *mode,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    ok = memory_command("certificate", "verify", cert, "--key", public, "--ledger", location)
    assert ok.returncode == 0, (ok.stdout, ok.stderr)
    assert ok.stdout.startswith(f"ok: {cert}: fact {fact} erased"), ok.stdout
    assert "chain verifies, fact forgotten" in ok.stdout
    secret = urlsplit(location).password if "://" in location else None
    if secret:  # a PostgreSQL location is named with its password masked
        assert unquote(secret) not in ok.stdout + ok.stderr and "***" in ok.stdout, ok.stdout
    wrong = memory_command("certificate", "verify", cert, "--key", public, "--ledger", other)
    assert wrong.returncode == 1, (wrong.stdout, wrong.stderr)
    assert wrong.stdout.startswith(f"FAILED: {cert}: the ledger is "), wrong.stdout
    with Ledger(location, forget_mode=forget_mode) as ledger:
        fact_now = ledger.get(fact)
        assert fact_now is not None and fact_now.value is None and fact_now.forgotten
    statement = json.loads(base64.b64decode(json.loads(cert.read_text())["payload"]))
    return statement["predicate"]  # type: ignore[no-any-return]

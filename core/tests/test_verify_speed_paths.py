"""``verify``'s start-up: what the command imports only when it needs it (docs/performance.md).

A run of ``agent-custody-memory verify`` pays its imports before the first event is checked;
``cryptography`` (through ``agent_custody_state.keys``, 10-20 ms) is needed only to load the
``--key`` that checkpoint signatures are checked against.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main
from agent_custody_state.server.signing import generate_key_pair

FACT = {"subject": "acct:42", "predicate": "plan", "space": "org", "actor": "agent"}

#: Runs ``verify`` in a fresh interpreter and says whether ``cryptography`` was imported.
PROBE = """
import sys
from agent_custody_state.cli import main
code = main(sys.argv[1:])
print("cryptography" in sys.modules, code)
"""


def _verify_fresh(*argv: str) -> tuple[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "verify", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = done.stdout.splitlines()
    return lines[-1], "\n".join(lines[:-1])


def _ledger(tmp_path: Path, **options: object) -> Path:
    path = tmp_path / "l.jsonl"
    with Ledger(path, **options) as ledger:  # type: ignore[arg-type]
        ledger.assert_many([{**FACT, "subject": f"s{i}", "value": i} for i in range(6)])
    return path


def test_verify_without_a_key_does_not_import_cryptography(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    probe, report = _verify_fresh("--ledger", str(path))
    assert probe == "False 0"
    assert report.startswith(f"ok: {path}: 6 events, chain from genesis at event 1, head ")


def test_verify_with_a_key_still_checks_signatures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    private, public, _ = generate_key_pair(tmp_path / "keys" / "memory.key")
    path = _ledger(tmp_path, checkpoint_key=private, checkpoint_every=2)
    probe, report = _verify_fresh("--ledger", str(path), "--key", str(public))
    assert probe == "True 0"
    assert report.endswith("1 checkpoint(s) (signatures verified)")
    # A key that is not one is refused with the same message as before.
    bad = tmp_path / "not-a-key.pem"
    bad.write_text("nothing here\n")
    assert main(["verify", "--ledger", str(path), "--key", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: --key: ")

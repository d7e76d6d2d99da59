"""The SPEC model's random histories (``test_spec_model``) in crypto-shred mode and with signed
checkpoints.

In crypto-shred mode every value is sealed before it reaches the event backend and opened again
on every read, and a forget destroys the value's key; docs/forget.md ("What stays the same")
promises the same reads as a plain ledger given the same calls, so every outcome and every read
must agree with the model exactly as a plain ledger's do. Afterwards the stored events hold no
plaintext value (each is an envelope, or null once forgotten), and ``verify`` accepts the chain
and every checkpoint signature. The plugins run the same on SQLite and PostgreSQL
(``test_spec_model_sqlite.py``, ``test_spec_model_postgres.py``), with these helpers.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from test_spec_model import EXAMPLES, Case, _case, drive, drive_reopened

from agent_custody_state import Ledger
from agent_custody_state.cli import main
from agent_custody_state.server.signing import generate_key_pair

SHRED: dict[str, Any] = {"forget_mode": "crypto-shred"}
EVERY = 3  # a checkpoint every few events, so most histories hold several
#: Fewer examples than the memory ledger's property: a file ledger in crypto-shred mode writes
#: a key store beside it and rewrites the file at every forget.
shred_settings = settings(
    max_examples=max(5, EXAMPLES // 8), deadline=None, suppress_health_check=list(HealthCheck)
)


def assert_sealed(ledger: Ledger) -> None:
    """Every value ``ledger`` stores is an envelope or null (forgotten): no plaintext reached
    its events."""
    for text in ledger.backend.stored_events():
        event = json.loads(text)
        value = event["fact"]["value"] if event["kind"] == "assert" else None
        assert value is None or (isinstance(value, dict) and "shred" in value), text


def key_pair(folder: Path) -> tuple[Path, Path]:
    """A checkpoint key pair (private, public) in ``folder``."""
    private, public, _ = generate_key_pair(folder / "memory.key")
    return private, public


def assert_verified(
    location: str | os.PathLike[str], public_key: Path, signed: bool, *options: str
) -> None:
    """``agent-custody-memory verify`` with the checkpoint key (and ``options``): exit 0 and,
    when ``signed`` (the history was long enough for a checkpoint), at least one checkpoint,
    every signature verified. (A checkpoint follows the write that reached
    ``checkpoint_every`` events since the last one, so a sweep's many forgets bring one.)"""
    out = io.StringIO()
    argv = ["verify", "--ledger", os.fspath(location), "--key", str(public_key), *options]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(argv)
    report = out.getvalue()
    assert code == 0, report
    found = re.search(r", (\d+) checkpoint\(s\)( \(signatures verified\))?$", report.strip())
    assert found is not None, report
    assert not signed or (int(found[1]) > 0 and found[2]), report


@pytest.fixture(scope="module")
def signing(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return key_pair(tmp_path_factory.mktemp("keys"))


@settings(shred_settings, max_examples=max(5, EXAMPLES // 4))
@given(_case)
def test_memory_ledger_in_crypto_shred_mode_matches_the_spec_model(case: Case) -> None:
    run = drive(lambda clock, key: Ledger("memory:", clock=clock, forget_key=key, **SHRED), case)
    with run.ledger:
        assert_sealed(run.ledger)


def test_jsonl_ledger_in_crypto_shred_mode_with_checkpoints_matches_the_spec_model(
    signing: tuple[Path, Path],
) -> None:
    check_file_ledger("ledger.jsonl", signing)


def check_file_ledger(name: str, signing: tuple[Path, Path]) -> None:
    """A file ledger ``name`` (JSONL here, SQLite in its plugin's tests) in crypto-shred mode
    with checkpoints: driven, reopened (the key store beside the file opens the values again),
    then sealed and verified with every checkpoint's signature."""
    signed: dict[str, Any] = {"checkpoint_key": signing[0], "checkpoint_every": EVERY}

    @shred_settings
    @given(_case)
    def check(case: Case) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / name
            run = drive_reopened(
                lambda clock, key: Ledger(path, clock=clock, forget_key=key, **SHRED, **signed),
                case,
            )
            with Ledger(path, **SHRED) as ledger:
                assert_sealed(ledger)
            assert_verified(path, signing[1], run.model.count() >= EVERY)

    check()

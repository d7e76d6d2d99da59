"""The SPEC model's random histories (``core/tests/test_spec_model.py``) on a SQLite ledger in
crypto-shred mode with signed checkpoints.

SQLite answers the reads with its own SQL (``asserts_around``, ``events_along``, ``find_asserts``
and the query columns), and in crypto-shred mode opens each sealed value with its key from the
key store beside the file; every outcome and every read must still agree with the model, also
after the file is reopened. Then no plaintext value is stored and ``verify`` accepts the chain and
the checkpoints. (The plain-mode property on SQLite is ``test_review3_semantics_sqlite.py``.)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

from agent_custody_state import Ledger

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "core" / "tests"))
from test_spec_model import Case, _case, drive_reopened
from test_spec_model_shred import (
    EVERY,
    SHRED,
    assert_sealed,
    assert_verified,
    key_pair,
    shred_settings,
)


@pytest.fixture(scope="module")
def signing(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return key_pair(tmp_path_factory.mktemp("keys"))


def test_sqlite_ledger_in_crypto_shred_mode_with_checkpoints_matches_the_spec_model(
    signing: tuple[Path, Path],
) -> None:
    signed: dict[str, Any] = {"checkpoint_key": signing[0], "checkpoint_every": EVERY}

    @shred_settings
    @given(_case)
    def check(case: Case) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "ledger.sqlite"
            run = drive_reopened(
                lambda clock, key: Ledger(path, clock=clock, forget_key=key, **SHRED, **signed),
                case,
            )
            with Ledger(path, **SHRED) as ledger:
                assert_sealed(ledger)
            assert_verified(path, signing[1], run.model.count() >= EVERY)

    check()

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
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "core" / "tests"))
from test_spec_model_shred import check_file_ledger, key_pair


@pytest.fixture(scope="module")
def signing(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return key_pair(tmp_path_factory.mktemp("keys"))


def test_sqlite_ledger_in_crypto_shred_mode_with_checkpoints_matches_the_spec_model(
    signing: tuple[Path, Path],
) -> None:
    check_file_ledger("ledger.sqlite", signing)

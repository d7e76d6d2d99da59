"""The SPEC model's random histories (``core/tests/test_spec_model.py``) on PostgreSQL.

PostgreSQL answers the reads with its own statements (``LATERAL`` index probes for
``asserts_around`` and ``events_along``, the paged ``find_asserts``, the loose index scan of
``spaces``), so every outcome and every read must agree with the model on a table of its own per
example, also when reopened; in crypto-shred mode (the keys in the same database) with signed
checkpoints too, after which no plaintext value is stored and ``verify`` accepts the chain and
the checkpoints. Each example creates a table on the embedded server, so the counts are a
fraction of ``AGENT_CUSTODY_SPEC_MODEL_EXAMPLES`` (raise it for a longer run).
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

from agent_custody_state import Ledger

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "core" / "tests"))
from test_spec_model import EXAMPLES, Case, _case, drive_reopened
from test_spec_model_shred import (
    EVERY,
    SHRED,
    assert_sealed,
    assert_verified,
    key_pair,
    shred_settings,
)

pytestmark = pytest.mark.postgres


def fresh_table(postgres_url: str) -> str:
    """A URL naming a table no example has used."""
    return f"{postgres_url}&table=model_{uuid.uuid4().hex[:12]}"


def test_postgres_ledger_matches_the_spec_model(postgres_url: str) -> None:
    @settings(shred_settings, max_examples=max(5, EXAMPLES // 10))
    @given(_case)
    def check(case: Case) -> None:
        url = fresh_table(postgres_url)
        drive_reopened(lambda clock, key: Ledger(url, clock=clock, forget_key=key), case)

    check()


def test_postgres_ledger_in_crypto_shred_mode_with_checkpoints_matches_the_spec_model(
    postgres_url: str, tmp_path: Path
) -> None:
    """The key store is a table beside the events (the test role may not create the default
    ``<db>_keys`` database)."""
    private, public = key_pair(tmp_path)
    signed: dict[str, Any] = {"checkpoint_key": private, "checkpoint_every": EVERY}

    @settings(shred_settings, max_examples=max(3, EXAMPLES // 20))
    @given(_case)
    def check(case: Case) -> None:
        url = fresh_table(postgres_url)
        keys: dict[str, Any] = {**SHRED, "key_store": f"{url}_keys"}
        run = drive_reopened(
            lambda clock, key: Ledger(url, clock=clock, forget_key=key, **keys, **signed), case
        )
        with Ledger(url, **keys) as ledger:
            assert_sealed(ledger)
        # The ledger records its key store without the password: named again here.
        assert_verified(url, public, run.model.count() >= EVERY, "--key-store", keys["key_store"])

    check()

"""A long-lived process that opens SQLite ledgers and drops them without ``close()``.

SQLAlchemy's finalizer of a checked-out connection holds its pool, and the pool held the
backend's bound ``_open_connection`` (the engine's ``creator``): a dropped backend was reachable
from that finalizer for good, with its connection (two descriptors), its engine and every
object it read (about 300 KB a ledger). The creator reaches the backend weakly now.
"""

from __future__ import annotations

import importlib.util
import weakref
from pathlib import Path

import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger import forks

CYCLES = 30
_CORE = Path(__file__).resolve().parents[3] / "core" / "tests" / "test_review20_churn.py"
_spec = importlib.util.spec_from_file_location("core_review20_churn", _CORE)
assert _spec is not None and _spec.loader is not None
_core = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_core)
#: The process's descriptors once the key pools' refill threads have ended (the core's churn
#: tests: a dropped crypto-shred ledger's thread holds its key store a while).
descriptors = _core.descriptors


def one_fact(ledger: Ledger, value: object = "v") -> None:
    ledger.assert_fact(subject="s", predicate="p", value=value, space="org", actor="a")


@pytest.mark.parametrize("mode", ["plain", "crypto-shred"])
def test_a_dropped_sqlite_ledger_is_collected_with_its_connection(
    tmp_path: Path, mode: str
) -> None:
    path = str(tmp_path / "l.sqlite")
    Ledger(path, forget_mode=mode).close()
    before, watched = descriptors(), len(forks._WATCHED)
    backends = []
    for number in range(CYCLES):
        ledger = Ledger(path, forget_mode=mode)
        one_fact(ledger, number)
        backends.append(weakref.ref(ledger.backend))
        del ledger
    assert descriptors() - before <= 1
    assert len(forks._WATCHED) == watched
    assert not [ref for ref in backends if ref() is not None]
    with Ledger(path, forget_mode=mode) as ledger:  # the file still opens and writes
        one_fact(ledger)
        assert ledger.count() == CYCLES + 1

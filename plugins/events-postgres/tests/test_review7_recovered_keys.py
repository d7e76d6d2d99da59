"""Seventh review: keys a crash left doomed are destroyed at the next open (``shred.recover``)
and their rows compacted away by that open, not left in the key table's files until the next
forget. Before, the open destroyed them after the key store had already settled its pending
erasures, so the dead row versions waited for a later compaction."""

from __future__ import annotations

import pytest
from erasurekit import killed
from test_review7_keystore_erasure import _events, _keys, _on_disk

from agent_custody_state import Ledger
from agent_custody_state_conformance.postgres import EmbeddedPostgres

pytestmark = pytest.mark.postgres

#: Asserts a fact, prints its data key (hex), forgets it, and is killed (SIGKILL) by the key
#: store's ``destroy``: the forget committed, its key doomed and not destroyed yet.
KILLED_BEFORE_DESTROY = """
import os, signal, sys
from agent_custody_state import Ledger
from agent_custody_state.ledger.envelope import kid_of
from agent_custody_state_events_postgres.keystore import PostgresKeyStore
with Ledger(sys.argv[1], forget_mode="crypto-shred", key_store=sys.argv[2]) as ledger:
    fact = ledger.assert_fact(subject="d", predicate="email", value="v", space="u", actor="a")
    kid = kid_of(ledger.backend.inner.get_assert(fact.fact_id).fact.value)
    print(ledger.backend.keys.get([kid])[kid].hex(), flush=True)
    PostgresKeyStore.destroy = lambda self, kids: os.kill(os.getpid(), signal.SIGKILL)
    ledger.forget(fact_id=fact.fact_id, actor="dpo", reason="erasure")
"""


def test_keys_a_crash_left_doomed_are_erased_by_the_open_that_destroys_them(
    postgres_url: str, embedded_postgres: EmbeddedPostgres
) -> None:
    key = bytes.fromhex(killed(KILLED_BEFORE_DESTROY, _events(postgres_url), _keys(postgres_url)))
    assert _on_disk(embedded_postgres, postgres_url, key), "the live row holds the key"
    location = _events(postgres_url)
    with Ledger(location, forget_mode="crypto-shred", key_store=_keys(postgres_url)) as ledger:
        assert ledger.count() == 2  # the assert and its forget: the forget had committed
        assert _on_disk(embedded_postgres, postgres_url, key) == []  # before any compact

"""A block of crypto-shred keys written ahead that failed is not handed out once the cause is
gone (ninth review: a full disk while a block was written ahead failed the first write after
space came back, though nothing was wrong any more)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from agent_custody_state.backends.keystore_memory import MemoryKeyStore
from agent_custody_state.ledger.keypool import MAX_BLOCK, KeyPool


class FillingKeyStore(MemoryKeyStore):
    """A key store whose disk is full while ``full`` is set."""

    full = False

    def put(self, keys: Mapping[str, bytes]) -> None:
        if self.full:
            raise OSError(28, "No space left on device")
        super().put(keys)


def test_a_block_written_ahead_that_failed_is_not_handed_out() -> None:
    store = FillingKeyStore()
    pool = KeyPool(store)
    pool.take(1)[1]()  # the first blocks are on disk
    store.full = True
    failed = []
    for _ in range(10 * MAX_BLOCK):  # keys from blocks on disk, until one is written ahead
        _, durable = pool.take(1)
        durable()
        for refill in [r for r in pool._refills if not r.done]:
            refill._thread.join()
            failed += [refill] if refill.error is not None else []
        if failed:
            break
    assert failed, "no block was written ahead"
    store.full = False  # space is back
    n = len(pool._free)  # the failed block's keys and those left before it
    keys, durable = pool.take(n)
    durable()  # before: raised the full disk's error
    assert len({k.kid for k in keys}) == n
    assert set(store.get([k.kid for k in keys])) == {k.kid for k in keys}  # all on disk


def test_a_block_a_take_waits_for_still_raises_what_failed() -> None:
    store = FillingKeyStore()
    store.full = True
    pool = KeyPool(store)
    _, durable = pool.take(1)
    with pytest.raises(OSError, match="No space"):
        durable()

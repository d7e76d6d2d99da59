"""Event-backend rules for the forget mode a ledger is in: who may write values into it.

A crypto-shred ledger opened in plain mode (a process started without the mode) reads its
envelopes as opaque values, but must neither forget them (the key would survive) nor write new
values (they would be stored unencrypted). The second needs the backend: a crypto-shred opener
records the mode with the ledger (``EventBackend.record_forget_mode``) where every later opener
reads it (``recorded_forget_mode``), whatever key store it used (``ledger.modemark``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.backends.keystore_memory import MemoryKeyStore
from agent_custody_state.ledger.envelope import kid_of

from ..clock import StepClock
from ..rules import rule
from .base import BackendRules, KeyStoreFactory, StoreFactory

SECRET = "zq7-mode-marker"


class ShredModeRules(BackendRules):
    """The forget mode recorded with the ledger (docs/forget.md)."""

    __suite_root__ = True

    @rule("EB-S-plain-refused")
    def test_shred_plain_mode_cannot_forget(
        self, store_factory: StoreFactory, key_store_factory: KeyStoreFactory, clock: StepClock
    ) -> None:
        """The same location opened in plain mode shows envelopes as opaque values and refuses
        to forget them (the key would survive).

        Troubleshooting: nothing backend-specific: the ledger refuses before writing.
        """
        with self._open(store_factory("shred-plain"), key_store_factory, clock=clock) as shred:
            a = self._assert(shred, value=SECRET)
        with Ledger(store_factory("shred-plain"), clock=clock) as plain:
            fact = plain.get(a.fact_id)
            assert fact is not None and kid_of(fact.value) is not None
            with pytest.raises(LedgerError, match="crypto-shred") as info:
                plain.forget(fact_id=a.fact_id, actor="x", reason="r")
            assert info.value.code == "crypto_shred"

    @rule("EB-S-mode-marked")
    def test_shred_mode_is_recorded_for_every_opener(
        self, store_factory: StoreFactory, clock: StepClock
    ) -> None:
        """A crypto-shred opener records the mode with the ledger, whatever its key store (here
        one in memory, nowhere near the events); a later plain-mode opener of the same location
        then refuses to write values, with code ``crypto_shred``, and writes nothing, while it
        still records events without a value. A plain ledger records no mode.

        Troubleshooting: implement ``record_forget_mode`` and ``recorded_forget_mode`` on a
        place every opener of the location reads (a sidecar file, a table beside the events);
        a mark read once may be remembered, "no mark" only for a moment.
        """
        keys = MemoryKeyStore("memory:elsewhere")
        with self._open(
            store_factory("mode-mark"), lambda b: None, key_store=keys, clock=clock
        ) as s:
            a = self._assert(s, value=SECRET)
            mark = s.backend.recorded_forget_mode()
            assert mark is not None and mark.mode == "crypto-shred", mark
            assert mark.key_store == keys.location
        with Ledger(store_factory("mode-mark"), clock=clock) as plain:
            count = plain.count()
            item: dict[str, Any] = {
                "subject": "s2", "predicate": "p", "space": "org", "actor": "x", "value": 1,
            }  # fmt: skip
            attempts: dict[str, Callable[[], object]] = {
                "assert_fact": lambda: plain.assert_fact(**item),
                "assert_many": lambda: plain.assert_many([item]),
                "import_events": lambda: plain.import_events(list(plain.export())),
            }
            for name, attempt in attempts.items():
                with pytest.raises(LedgerError, match="crypto-shred mode") as info:
                    attempt()
                assert info.value.code == "crypto_shred", name
                assert keys.location in str(info.value), "the refusal names the key store"
            assert plain.count() == count
            plain.retract(fact_id=a.fact_id, actor="ops", reason="no value written")
        with Ledger(store_factory("mode-plain"), clock=clock) as other:
            self._assert(other, value="plain")
            assert other.backend.recorded_forget_mode() is None

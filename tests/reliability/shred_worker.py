"""The crash worker of ``crash_worker.py`` in crypto-shred mode, telling the test its key ids.

Run as ``python shred_worker.py zygote``: the same zygote protocol, the same random operations
and kill points, with every worker's ledger opened in crypto-shred mode (the test passes
``options``) and one more kind of line in the acknowledgement file: ``{"t": "kids", "kids":
{factId: keyId}}``, written after each acknowledged assert and, at start, for every live fact.
A fact forgotten later therefore always has a known key id, so the test can check that its key
is gone after recovery; the key id is read from the backend's stored envelope.

This file is test machinery, not part of the product.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

import crash_worker


class ShredWorker(crash_worker.Worker):
    """A crash worker that also notes the key id of every fact it sees."""

    def _load(self) -> None:
        super()._load()
        self._note_kids(sorted(self.live))

    def _run(self, name: str, intent: dict[str, Any], call: Any) -> None:
        super()._run(name, intent, call)
        self._note_kids(intent.get("values", {}))

    def _note_kids(self, fact_ids: Iterable[str]) -> None:
        from agent_custody_state.ledger.envelope import kid_of
        from agent_custody_state.ledger.model import AssertEvent

        ids = list(fact_ids)
        if not ids:
            return
        inner = self.ledger.backend.inner  # the events as stored: envelopes
        kids = {
            e.fact_id: kid
            for e in inner.events_for(ids)
            if isinstance(e, AssertEvent) and (kid := kid_of(e.fact.value)) is not None
        }
        if kids:
            self.note({"t": "kids", "kids": kids})


if __name__ == "__main__":
    if sys.argv[1:] != ["zygote"]:
        sys.exit("usage: shred_worker.py zygote")
    crash_worker.Worker = ShredWorker  # type: ignore[misc]  # what the zygote's forks run
    crash_worker.zygote()

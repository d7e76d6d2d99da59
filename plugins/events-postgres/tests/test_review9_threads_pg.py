"""One PostgreSQL ``Ledger`` shared by threads (ninth review): a forget loop under readers.

The snapshot bookkeeping (``_opening`` here, ``_solo`` in the SQL base) belongs to the thread
holding the backend's lock; read without it, a reader took another thread's section for its own
and failed (``AssertionError`` in ``_opened``) or opened a snapshot nothing ended."""

from __future__ import annotations

import sys
import threading
import traceback
import uuid
from typing import Any

from agent_custody_state import Ledger
from agent_custody_state.ledger.verify import verify_lines

FACT: dict[str, Any] = {"predicate": "p", "space": "o", "actor": "a"}


def test_a_forget_loop_under_readers_on_one_shared_ledger(postgres_url: str) -> None:
    url = f"{postgres_url}&table=threads_{uuid.uuid4().hex[:8]}"
    errors: list[str] = []
    done = threading.Event()
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often: the race needs a switch mid-read
    try:
        with Ledger(url) as ledger:
            ids = [
                ledger.assert_fact(subject=f"s{i % 5}", value=f"v{i}", **FACT).fact.fact_id
                for i in range(120)
            ]

            def forgetting() -> None:
                try:
                    for fact_id in ids:
                        ledger.forget(fact_id=fact_id, actor="a", reason="r")
                except BaseException:
                    errors.append(traceback.format_exc())
                finally:
                    done.set()

            def reading(kind: str) -> None:
                try:
                    while not done.is_set():
                        for i in range(5):
                            if kind == "as_of":
                                ledger.as_of(subject=f"s{i}")
                            else:
                                ledger.history(ids[i])
                except BaseException:
                    errors.append(traceback.format_exc())

            threads = [threading.Thread(target=forgetting)] + [
                threading.Thread(target=reading, args=(kind,)) for kind in ("as_of", "history")
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(120)
            assert not errors, errors[0]
            assert ledger.as_of() == []  # every fact forgotten
            report = verify_lines(ledger.backend.stored_events())
            assert report.ok, report
    finally:
        sys.setswitchinterval(before)

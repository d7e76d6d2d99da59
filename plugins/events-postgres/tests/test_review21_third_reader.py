"""Twenty-first review, third wave: ``verify``'s own connections have ``operation_timeout``.

``verify`` reads the ledger's chunks on connections of its own (``_reader``, in its worker
processes or in this one). They were opened without the bound and without the keepalives that
the backend's connection has, so a server that stopped answering (here: a table lock another
session holds, which the bound treats alike) left ``verify`` waiting forever on a chunk.
"""

from __future__ import annotations

import pickle
import threading
import time
from typing import Any

import psycopg

from agent_custody_state import Ledger
from agent_custody_state_events_postgres.deadline import KEEPALIVES, NoAnswer
from agent_custody_state_events_postgres.location import libpq_url

FACT = {"space": "o", "subject": "s", "predicate": "p", "actor": "a"}
BOUND = 0.5


def test_a_chunk_read_is_bounded_by_operation_timeout(postgres_url: str) -> None:
    with Ledger(postgres_url, operation_timeout=BOUND) as led:
        led.assert_fact(**FACT, value="v1")
        backend: Any = led.backend
        chunks = list(backend.stored_chunks(100))
        assert chunks
        chunk = pickle.loads(pickle.dumps(chunks[0]))  # as a worker gets it
        outcome: list[BaseException | None] = []

        def read() -> None:
            try:
                chunk.read()
                outcome.append(None)
            except BaseException as exc:
                outcome.append(exc)

        with psycopg.connect(libpq_url(backend.where.connect_url)) as holder:
            holder.execute(f"LOCK TABLE {backend._qualified} IN ACCESS EXCLUSIVE MODE")
            thread = threading.Thread(target=read, daemon=True)
            started = time.monotonic()
            thread.start()
            thread.join(BOUND + 5)
            waited = time.monotonic() - started
            holder.rollback()  # lets a reader still waiting go on
        thread.join(10)
        assert outcome and isinstance(outcome[0], NoAnswer), (outcome, waited)
        assert "operation_timeout=0.5s" in str(outcome[0])
        # Once the lock is gone, a new chunk connection reads again.
        assert pickle.loads(pickle.dumps(chunks[0])).read().lines


def test_a_chunk_connection_has_the_keepalive_defaults(postgres_url: str) -> None:
    with Ledger(postgres_url, operation_timeout=BOUND) as led:
        connect = led.backend._reader()  # type: ignore[attr-defined]
        conn = pickle.loads(pickle.dumps(connect))()
        try:
            params = conn.info.get_parameters()
            assert params.get("keepalives_idle") == str(KEEPALIVES["keepalives_idle"]), params
        finally:
            conn.close()

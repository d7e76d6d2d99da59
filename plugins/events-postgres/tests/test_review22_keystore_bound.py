"""Twenty-second review: the crypto-shred key store's connection and the erasure log's own one
are bounded by the ledger's ``operation_timeout`` (``deadline``), as its own connection is.

The server process serving the key store's connection is stopped (``SIGSTOP``, always resumed)
at a chosen point of a call: a read's key lookup, a forget's key lookup, its intent (``doom``),
its destruction after the commit, a certificate's look at the key tables' files. Each call
fails after the bound with an error naming it, or (the destruction, which the forget's
compaction retries on a new connection) completes; none waits forever. A forget stays
all-or-nothing by the crash-point rules of ``shred``: the ledger reads as before the failed
call, an intent committed late is spared, and a retry completes the forget with the key gone.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state import Ledger
from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state.ledger.envelope import kid_of
from agent_custody_state.plugin import KeyStoreError
from agent_custody_state_conformance.postgres import EmbeddedPostgres
from agent_custody_state_events_postgres.location import libpq_url, parse_location
from agent_custody_state_events_postgres.store import PostgresBackend

FACT = {"space": "o", "subject": "s", "predicate": "p", "actor": "a"}
BOUND = 1
NAMED = f"operation_timeout={BOUND}s"


def keys_url(url: str) -> str:
    return f"{url}&table=keys"


def sql(url: str, query: str) -> list[Any]:
    """``query``'s rows, on a fresh connection to the database of ``url``."""
    with psycopg.connect(libpq_url(parse_location(url).connect_url), autocommit=True) as conn:
        return conn.execute(query).fetchall()


def outcome(call: Callable[[], Any]) -> BaseException | None:
    """What ``call`` raised (None: it returned), on a thread; one still waiting after the bound
    and a margin fails the test (the caller resumes the server, which lets the thread end)."""
    result: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            result.append(None)
        except BaseException as exc:
            result.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(BOUND * 3 + 5)
    assert result, "the call still waits on a key store that does not answer"
    return result[0]


def timed_out(call: Callable[[], Any]) -> str:
    err = outcome(call)
    assert isinstance(err, EventBackendError), err
    assert NAMED in str(err), err
    return str(err)


class Stop:
    """The key store's server process, stopped when ``keys.<method>`` is next called."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, keys: Any, method: str) -> None:
        original = getattr(keys, method)
        self.pid, self.fired = int(keys._conn.info.backend_pid), False

        def stopping(*args: Any) -> Any:
            monkeypatch.setattr(keys, method, original)  # once
            os.kill(self.pid, signal.SIGSTOP)
            self.fired = True
            return original(*args)

        monkeypatch.setattr(keys, method, stopping)

    def resume(self, url: str) -> None:
        """Resume it and wait until it has ended (its client went away): whatever it still did
        with the statement it was sent is done by then."""
        os.kill(self.pid, signal.SIGCONT)
        assert self.fired, "the key store was not called where the test stops it"
        deadline = time.monotonic() + 10
        while sql(url, f"SELECT 1 FROM pg_stat_activity WHERE pid = {self.pid}"):
            assert time.monotonic() < deadline, "the stopped server process did not end"
            time.sleep(0.05)


def state(url: str) -> list[tuple[str, str]]:
    """Every event of the ledger at ``url``, read on a fresh connection."""
    with Ledger(url) as led:
        return [(e.kind, e.fact_id) for e in led.export()]


@pytest.fixture
def ledger(postgres_url: str) -> Iterator[Ledger]:
    led = Ledger(
        postgres_url,
        forget_mode="crypto-shred",
        key_store=keys_url(postgres_url),
        operation_timeout=BOUND,
    )
    try:
        yield led
    finally:
        led.close()


def kid(ledger: Ledger, fact_id: str) -> str:
    found = kid_of(ledger.backend.inner.get_assert(fact_id).fact.value)  # type: ignore[attr-defined]
    assert found is not None
    return found


def test_a_crypto_shred_read_fails_after_the_bound_and_recovers(
    ledger: Ledger, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fact = ledger.assert_fact(**FACT, value="v1")
    stop = Stop(monkeypatch, ledger.backend.keys, "get")  # type: ignore[attr-defined]
    try:
        text = timed_out(lambda: ledger.get(fact.fact_id))
    finally:
        stop.resume(postgres_url)
    assert "key store" in text
    got = ledger.get(fact.fact_id)  # the key store on a new connection
    assert got is not None and got.value == "v1"


@pytest.mark.parametrize("method", ["get", "doom"])
def test_a_forget_cut_off_before_its_commit_is_not_half_done(
    ledger: Ledger, postgres_url: str, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    fact = ledger.assert_fact(**FACT, value="secret")
    key = kid(ledger, fact.fact_id)
    before = state(postgres_url)
    keys: Any = ledger.backend.keys  # type: ignore[attr-defined]
    stop = Stop(monkeypatch, keys, method)
    try:
        timed_out(lambda: ledger.forget(fact_id=fact.fact_id, actor="a", reason="r"))
    finally:
        stop.resume(postgres_url)
    monkeypatch.undo()
    assert state(postgres_url) == before  # not forgotten
    assert keys.get([key]), "the key of a fact not forgotten is kept"
    # A doom the server ran after its client left is an intent of a forget that did not
    # commit: the next settlement spares it (``shredrecover``).
    assert set(keys.doomed()) <= {key}
    got = ledger.get(fact.fact_id)
    assert got is not None and got.value == "secret"
    ledger.forget(fact_id=fact.fact_id, actor="a", reason="r")  # the retry completes
    forgotten = ledger.get(fact.fact_id)
    assert forgotten is not None and forgotten.value is None
    assert keys.get([key]) == {} and keys.doomed() == {}


def test_a_destroy_cut_off_after_the_commit_is_finished_by_the_compaction(
    ledger: Ledger, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fact = ledger.assert_fact(**FACT, value="secret")
    key = kid(ledger, fact.fact_id)
    keys: Any = ledger.backend.keys  # type: ignore[attr-defined]
    stop = Stop(monkeypatch, keys, "destroy")
    started = time.monotonic()
    try:  # the destroy fails after the bound; the forget's compaction destroys the key anew
        assert outcome(lambda: ledger.forget(fact_id=fact.fact_id, actor="a", reason="r")) is None
    finally:
        stop.resume(postgres_url)
    assert time.monotonic() - started < BOUND * 3 + 5
    forgotten = ledger.get(fact.fact_id)
    assert forgotten is not None and forgotten.value is None
    assert keys.get([key]) == {} and keys.doomed() == {}


def test_a_certificate_on_a_stopped_key_store_is_bounded(
    postgres_url: str, embedded_postgres: EmbeddedPostgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (
        embedded_postgres.scannable(),
        Ledger(
            postgres_url,
            forget_mode="crypto-shred",
            key_store=keys_url(postgres_url),
            operation_timeout=BOUND,
            checkpoint_key=Ed25519PrivateKey.generate(),
        ) as ledger,
    ):
        fact = ledger.assert_fact(**FACT, value="secret")
        stop = Stop(monkeypatch, ledger.backend.keys, "local_files")  # type: ignore[attr-defined]
        forget = ledger.forget
        try:
            timed_out(lambda: forget(fact_id=fact.fact_id, actor="a", reason="r", certificate=True))
        finally:
            stop.resume(postgres_url)
        forgotten = ledger.get(fact.fact_id)  # the forget itself had committed
        assert forgotten is not None and forgotten.value is None


def test_the_erasure_logs_own_connection_is_bounded(postgres_url: str) -> None:
    backend = PostgresBackend(f"{postgres_url}&table=events", operation_timeout=BOUND)
    keys = backend.keystore(keys_url(postgres_url))
    backend.close()  # the key store outlives it: its erasure log reads on a connection of its own
    try:
        with psycopg.connect(libpq_url(parse_location(postgres_url).connect_url)) as holder:
            holder.execute("LOCK TABLE events_shredded IN ACCESS EXCLUSIVE MODE")
            err = outcome(keys.buried)
            holder.rollback()
        assert isinstance(err, KeyStoreError) and NAMED in str(err), err
        assert keys.buried() == {}
    finally:
        keys.close()

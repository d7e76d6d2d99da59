"""Twenty-first review: a PostgreSQL server that stops answering (``deadline``).

The server process serving the ledger's connection is stopped (``SIGSTOP``, always resumed) at
chosen points of a call: a read, a write section part-way, its ``COMMIT``, a forget. Each call
fails after ``operation_timeout`` with an error naming it, instead of waiting forever; once the
server is resumed, the ledger reads as before the failed call (a write either committed wholly
or not at all) and the same ``Ledger`` works again on a new connection. An open against a
stopped postmaster, or against a port that accepts and never answers, is bounded by
``connect_timeout``.
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state_events_postgres.deadline import (
    DEFAULT_OPERATION_TIMEOUT,
    KEEPALIVES,
    connect_args,
)

FACT = {"space": "o", "subject": "s", "predicate": "p", "actor": "a"}
BOUND = 0.5


@contextmanager
def stopped(pid: int) -> Iterator[None]:
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def server_pid(led: Ledger) -> int:
    return int(led.backend._raw.info.backend_pid)  # type: ignore[attr-defined]


def timed_out(call: Callable[[], Any], text: str = "operation_timeout=0.5s") -> str:
    """The error ``call`` fails with, on a thread: one still waiting after the bound and a
    margin fails the test (the caller resumes the server, which lets the thread end)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(BOUND + 5)
    assert outcome, "the call still waits on a server that does not answer"
    err = outcome[0]
    assert isinstance(err, EventBackendError), err
    assert text in str(err), err
    return str(err)


def state(url: str) -> list[tuple[str, str]]:
    """Every event of the ledger at ``url``, read on a fresh connection."""
    with Ledger(url) as led:
        return [(e.kind, e.fact_id) for e in led.export()]


@pytest.fixture
def ledger(postgres_url: str) -> Iterator[Ledger]:
    led = Ledger(postgres_url, operation_timeout=BOUND)
    try:
        yield led
    finally:
        led.close()


def test_a_read_fails_after_the_bound_and_the_ledger_recovers(
    ledger: Ledger, postgres_url: str
) -> None:
    fact = ledger.assert_fact(**FACT, value="v1")
    with stopped(server_pid(ledger)):
        timed_out(lambda: ledger.get(fact.fact_id))
    got = ledger.get(fact.fact_id)  # a new connection
    assert got is not None and got.value == "v1"


def test_a_write_cut_off_part_way_writes_nothing(
    ledger: Ledger, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = ledger.assert_fact(**FACT, value="v1")
    before = state(postgres_url)
    backend: Any = ledger.backend
    ordered = backend.ordered
    pid = server_pid(ledger)

    def stop_then_order() -> None:  # the section's locks are taken; its stamp and append not
        monkeypatch.setattr(backend, "ordered", ordered)  # once
        os.kill(pid, signal.SIGSTOP)
        ordered()

    monkeypatch.setattr(backend, "ordered", stop_then_order)
    try:
        timed_out(lambda: ledger.assert_fact(**FACT, value="v2", supersedes=first.fact_id))
    finally:
        os.kill(pid, signal.SIGCONT)
    monkeypatch.undo()
    assert state(postgres_url) == before
    # The cut-off session's locks went with it: the same supersession now goes through.
    ledger.assert_fact(**FACT, value="v2", supersedes=first.fact_id)
    assert len(state(postgres_url)) == len(before) + 1


def test_a_commit_cut_off_is_all_or_nothing(
    ledger: Ledger, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger.assert_fact(**FACT, value="v1")
    before = state(postgres_url)
    backend: Any = ledger.backend
    commit_statement = backend._commit_statement
    pid = server_pid(ledger)

    def stop_then_commit() -> str:
        monkeypatch.setattr(backend, "_commit_statement", commit_statement)  # once
        os.kill(pid, signal.SIGSTOP)
        return str(commit_statement())

    monkeypatch.setattr(backend, "_commit_statement", stop_then_commit)
    try:
        text = timed_out(lambda: ledger.assert_fact(**FACT, value="v2", fact_id="f2"))
    finally:
        os.kill(pid, signal.SIGCONT)
    monkeypatch.undo()
    assert "may or may not have been recorded" in text
    after = state(postgres_url)
    assert after in (before, [*before, ("assert", "f2")])
    got = ledger.get("f2")  # the same ledger, on a new connection, agrees
    assert (got is None) == (after == before)
    assert got is None or got.value == "v2"


def test_a_forget_on_a_stopped_server_is_bounded(ledger: Ledger, postgres_url: str) -> None:
    fact = ledger.assert_fact(**FACT, value="secret")
    before = state(postgres_url)
    with stopped(server_pid(ledger)):
        timed_out(lambda: ledger.forget(fact_id=fact.fact_id, actor="a", reason="r"))
    assert state(postgres_url) == before  # not forgotten, not half-forgotten
    ledger.forget(fact_id=fact.fact_id, actor="a", reason="r")
    forgotten = ledger.get(fact.fact_id)
    assert forgotten is not None and forgotten.value is None


def test_an_open_on_a_stopped_postmaster_is_bounded(
    postgres_url: str, embedded_postgres: Any
) -> None:
    with stopped(embedded_postgres.pid):
        timed_out(lambda: Ledger(postgres_url, connect_timeout=1), "timeout expired")
    # The abandoned attempt's socket goes with its objects: the server's backend for it then
    # ends at once, not after authentication_timeout (60 s, which the database's drop waited).
    gc.collect()


def test_a_port_that_never_answers_is_bounded() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:  # accepts, reads nothing, answers nothing
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    port = listener.getsockname()[1]
    try:
        timed_out(
            lambda: Ledger(f"postgresql://u:pw@127.0.0.1:{port}/db", connect_timeout=1),
            "timeout expired",
        )
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        listener.close()


def test_keepalives_are_on_unless_the_location_says_otherwise() -> None:
    assert DEFAULT_OPERATION_TIMEOUT > 0
    args = connect_args("postgresql+psycopg://u@h/db", 7)
    assert args == {"connect_timeout": 7, **KEEPALIVES}
    own = connect_args("postgresql+psycopg://u@h/db?keepalives_idle=5&tcp_user_timeout=0", 7)
    assert "keepalives_idle" not in own and "tcp_user_timeout" not in own
    assert own["keepalives"] == 1


@pytest.mark.parametrize("bad", [-1, float("nan"), "5", True])
def test_a_bad_bound_is_refused(postgres_url: str, bad: object) -> None:
    with pytest.raises((TypeError, ValueError), match="operation_timeout"):
        Ledger(postgres_url, operation_timeout=bad)

"""Concurrency review: write sections against clock skew, lost connections and crypto-shred
recovery, on the embedded PostgreSQL (real connections, real locks, no mocks)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.ledger.verify import verify_lines
from agent_custody_state.plugin import EventBackendError

pytestmark = pytest.mark.postgres

WAIT = 10.0
EARLY = datetime(2026, 9, 1, 10, 0, 0, tzinfo=UTC)
LATE = datetime(2026, 9, 1, 10, 0, 5, tzinfo=UTC)


def _fact(ledger: Ledger, subject: str = "alice", **more: Any) -> str:
    return ledger.assert_fact(
        subject=subject, predicate="city", value="Oslo", space="s", actor="a", **more
    ).fact_id


# -- transaction time along the append order, two servers whose clocks disagree --------------

ACTIONS: dict[str, Callable[[Ledger, str], Any]] = {
    "retract": lambda ledger, f: ledger.retract(fact_id=f, actor="b", reason="r"),
    "hold": lambda ledger, f: ledger.hold(fact_id=f, actor="b", reason="h"),
    "confirm": lambda ledger, f: ledger.confirm(fact_id=f, actor="b"),
    "forget": lambda ledger, f: ledger.forget(fact_id=f, actor="b", reason="f"),
}


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_an_action_from_a_slow_clock_does_not_go_back_in_time(
    postgres_url: str, action: str
) -> None:
    """Server A (clock ahead) asserts; server B (clock 5 s behind) then acts on the fact. The
    assert of B is raised to A's time (the order lock's head read); its retract, hold, confirm
    and forget must be too (docs/time.md: never backwards along the append order)."""
    location = f"{postgres_url}&table=skew&vacuum=false"
    with Ledger(location, clock=lambda: LATE) as a, Ledger(location, clock=lambda: EARLY) as b:
        fact = _fact(a, provenance="claimed") if action == "confirm" else _fact(a)
        ACTIONS[action](b, fact)
        times = [e.tx_time for e in b.export()]
    assert times == sorted(times), f"{action} stamped before the event it follows: {times}"


def test_an_assert_from_a_slow_clock_is_raised(postgres_url: str) -> None:
    """An assert's stamp is raised in the ordered phase, and a replacement whose validFrom
    defaults to that stamp is checked at the raised one: at B's own (5 s behind A's) it was
    refused, "replacement cannot start before the fact it supersedes"."""
    location = f"{postgres_url}&table=skew_assert"
    with Ledger(location, clock=lambda: LATE) as a, Ledger(location, clock=lambda: EARLY) as b:
        old = _fact(a)
        b.validate_assert(
            subject="alice", predicate="city", value="Oslo", space="s", actor="a", supersedes=old
        )
        new = _fact(b, supersedes=old)
        _fact(b, supersedes=new, valid_from="2026-09-01T10:00:05.000Z")
        many = b.assert_many([{**FACT, "subject": "bob"}])[0].fact_id
        b.assert_many([{**FACT, "subject": "bob", "supersedes": many}])
        times = [e.tx_time for e in b.export()]
        assert b.get(new) is not None
    assert times == sorted(times)


FACT = {"predicate": "city", "value": "Oslo", "space": "s", "actor": "a"}


# -- a connection lost mid-section -----------------------------------------------------------


class Held:
    """Writer A supersedes ``old`` and waits in its precondition (its key locks held)."""

    def __init__(self, ledger: Ledger, old: str) -> None:
        self.inside, self.release = threading.Event(), threading.Event()
        self.error: BaseException | None = None

        def hold(_state: Any) -> None:
            self.inside.set()
            assert self.release.wait(WAIT * 3)

        def run() -> None:
            try:
                ledger.assert_fact(
                    subject="alice", predicate="city", value="Paris", space="s", actor="a",
                    supersedes=old, precondition=hold,
                )  # fmt: skip
            except BaseException as exc:
                self.error = exc

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert self.inside.wait(WAIT)

    def finish(self) -> BaseException | None:
        self.release.set()
        self.thread.join(WAIT)
        assert not self.thread.is_alive()
        return self.error


def test_a_section_whose_connection_dies_leaves_nothing_and_no_lock(postgres_url: str) -> None:
    """A's server session is terminated while A holds its key locks mid-section: A fails
    (nothing of it written), B supersedes the same fact at once (no lock outlives the
    session), and A's next write reconnects."""
    location = f"{postgres_url}&table=lost"
    with Ledger(location) as a, Ledger(location) as b:
        old = _fact(a)
        held = Held(a, old)
        pid = a.backend._raw.info.backend_pid  # type: ignore[attr-defined]
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            locks = admin.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = %s", (pid,)
            ).fetchone()
            assert locks is not None and locks[0] >= 2  # the write key and A's key locks
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        error = held.finish()
        assert isinstance(error, (EventBackendError, LedgerError)), error
        done: dict[str, Any] = {}
        thread = threading.Thread(
            target=lambda: done.setdefault("id", _fact(b, supersedes=old)), daemon=True
        )
        thread.start()
        thread.join(WAIT)
        assert "id" in done, "B waited for a lock of A's dead session"
        _fact(a, subject="carol")  # A reconnects for its next section
        events = list(b.export())
        assert verify_lines(b.backend.stored_events()).ok
    assert [e.kind for e in events] == ["assert", "assert", "assert"]
    assert [getattr(e, "supersedes", None) for e in events][1] == old


# -- crypto-shred: a key is destroyed only once its forget has committed ----------------------


def test_recovery_at_open_waits_for_a_forget_under_way(postgres_url: str, tmp_path: Any) -> None:
    """A forget has doomed its fact's key and is held before its commit (another session
    holds a lock on the assert row it rewrites). A process opening the ledger then finds the
    doomed key; its recovery must wait for the forget to end (its exclusive section), not
    judge the fact live and spare the key, nor destroy it before the forget commits."""
    location = f"{postgres_url}&table=shred&vacuum=false"
    shred = {"forget_mode": "crypto-shred", "key_store": str(tmp_path / "keys.sqlite")}
    with Ledger(location, **shred) as a:
        fact = _fact(a)
        out: dict[str, Any] = {}
        with psycopg.connect(postgres_url) as blocker:  # a transaction: the row lock is held
            blocker.execute("SELECT 1 FROM shred WHERE fact_id = %s FOR UPDATE", (fact,))

            def forget() -> None:
                try:
                    out["event"] = a.forget(fact_id=fact, actor="a", reason="f")
                except BaseException as exc:
                    out["error"] = exc

            forgetting = threading.Thread(target=forget, daemon=True)
            forgetting.start()
            keys = a.backend.keys  # type: ignore[attr-defined]
            for _ in range(200):
                if keys.doomed():
                    break
                threading.Event().wait(0.05)
            assert keys.doomed(), "the forget never doomed its key"
            opened: dict[str, Any] = {}

            def open_b() -> None:
                try:
                    opened["ledger"] = Ledger(location, **shred)
                except BaseException as exc:
                    opened["error"] = exc

            opening = threading.Thread(target=open_b, daemon=True)
            opening.start()
            opening.join(1.0)
            assert opening.is_alive(), "recovery judged a forget that had not committed"
            assert keys.doomed(), "recovery settled the key of a forget under way"
            blocker.rollback()  # the forget's UPDATE goes on; it commits
        forgetting.join(WAIT)
        opening.join(WAIT)
        assert "event" in out, out
        b = opened["ledger"]
        try:
            assert not keys.doomed()
            assert b.get(fact).value is None  # type: ignore[union-attr]
        finally:
            b.close()

"""Tools to test an event backend shared by threads (docs/backends.md, "Threads").

A race between two threads is shown without sleeps by watching the backend's lock
(``ReentrantTransactions._lock``): ``spy_on`` puts a ``SpyLock`` in its place, which tells when
a watched thread has to wait for it, and ``behind`` runs one call while another thread holds
the lock mid-section. ``switching_often`` makes the interpreter switch threads often (a race
that needs a switch mid-call shows in a few hundred calls), and ``supersede_round`` has four
threads supersede one fact at once.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = ["SpyLock", "behind", "spy_on", "supersede_round", "switching_often"]


class SpyLock:
    """A backend's re-entrant lock, telling (``waiting``) when the thread ``watched`` has to
    wait for it: the moment another thread holds it and this one is blocked behind it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.waiting = threading.Event()
        self.watched: int | None = None

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self.inner.acquire(blocking=False):
            return True
        if threading.get_ident() == self.watched:
            self.waiting.set()
        return bool(self.inner.acquire(blocking, timeout))

    def release(self) -> None:
        self.inner.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def spy_on(ledger: Any) -> SpyLock:
    """Put a ``SpyLock`` in place of the ledger's backend's lock; returns it."""
    spy = SpyLock(ledger.backend._lock)
    ledger.backend._lock = spy
    return spy


def behind(spy: SpyLock, hold: Callable[[Callable[[], None]], Any], then: Callable[[], Any]) -> Any:
    """Run ``hold(pause)`` in one thread (``pause`` blocks it while it holds the lock) and
    ``then()`` in another once the first pauses; the first goes on once the second waits for
    the lock (or has finished without waiting). Returns what ``then()`` returned; a failure in
    either thread fails the caller with its traceback."""
    paused, go = threading.Event(), threading.Event()
    results: dict[str, Any] = {}
    errors: list[str] = []

    def pause() -> None:
        paused.set()
        assert go.wait(10)

    def first() -> None:
        try:
            hold(pause)
        except BaseException:
            errors.append(traceback.format_exc())
            paused.set()

    def second() -> None:
        spy.watched = threading.get_ident()
        try:
            results["then"] = then()
        except BaseException:
            errors.append(traceback.format_exc())
        finally:
            spy.waiting.set()

    a = threading.Thread(target=first)
    a.start()
    assert paused.wait(10)
    b = threading.Thread(target=second)
    b.start()
    assert spy.waiting.wait(10)
    go.set()
    a.join(10)
    b.join(10)
    assert not errors, errors[0]
    return results.get("then")


@contextlib.contextmanager
def switching_often() -> Iterator[None]:
    """Switch threads every 10 µs inside the block (``sys.setswitchinterval``)."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def supersede_round(
    ledger: Any, base: str, r: int, fact: Mapping[str, Any], *, batches: bool = True
) -> tuple[list[str], list[BaseException]]:
    """Four threads supersede ``base`` at once (with ``batches``, the odd ones through
    ``assert_many``): the ids of the facts written, and what the others raised."""
    barrier = threading.Barrier(4)
    won: list[str] = []
    lost: list[BaseException] = []

    def supersede(i: int) -> None:
        item = {**fact, "value": f"v{r}.{i}", "supersedes": base}
        barrier.wait()
        try:
            if batches and i % 2:
                [event] = ledger.assert_many([item])
            else:
                event = ledger.assert_fact(**item)
            won.append(event.fact.fact_id)
        except BaseException as exc:
            lost.append(exc)

    writers = [threading.Thread(target=supersede, args=(i,)) for i in range(4)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(10)
    return won, lost

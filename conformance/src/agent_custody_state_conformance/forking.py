"""Helpers for tests of a ledger opened before ``fork()``: a child that reports back, a
parent thread held inside a section, and a workload that reads back what it wrote.

Shared by the core's and the SQL plugins' fork tests (``test_fork_*.py``); a third party's
backend can use them the same way. A child always ends with ``os._exit`` (never returning into
pytest, even when its parent has gone), and dies by ``SIGALRM`` when stuck on a lock a thread of
its parent held, so a regression is a failed test, not a hung run.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

#: The fact keys every workload write shares (its subject and value name the writer).
FACT: dict[str, Any] = {"predicate": "p", "space": "o", "actor": "a"}


def work(ledger: Any, tag: str, n: int = 20) -> list[str]:
    """``n`` asserts, each read back (by id and by subject); their fact ids."""
    ids = []
    for i in range(n):
        fact = ledger.assert_fact(subject=f"{tag}{i}", value=f"{tag}-v{i}", **FACT).fact
        assert [e.fact_id for e in ledger.history(fact.fact_id)] == [fact.fact_id]
        assert [f.value for f in ledger.as_of(subject=f"{tag}{i}")] == [f"{tag}-v{i}"]
        ids.append(fact.fact_id)
    return ids


def fork_child(child: Callable[[], Any], alarm: int = 20) -> tuple[int, int]:
    """Fork; the child runs ``child`` and writes its JSON result (exit 0) or its traceback
    (exit 1) to the pipe whose read end is returned with its pid."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        code = 1
        try:
            os.close(read)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)  # not a parent's handler
            signal.alarm(alarm)  # a child stuck on a lock its parent's thread held dies
            out = json.dumps(child()).encode()
            code = 0
        except BaseException:
            out = traceback.format_exc().encode()
        finally:
            try:  # a parent gone (its test failed) must not leave this child running pytest
                with os.fdopen(write, "wb") as pipe:
                    pipe.write(out)
            finally:
                os._exit(code)
    os.close(write)
    return pid, read


def join_child(pid: int, read: int) -> Any:
    """The child's JSON result; a failed or stuck child fails the test with what it said."""
    with os.fdopen(read, "rb") as pipe:
        out = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out or "the child died (stuck: SIGALRM)"
    return json.loads(out)


@contextmanager
def held(enter: Callable[[], AbstractContextManager[object]]) -> Iterator[None]:
    """A thread of this process inside ``enter()`` until the block ends."""
    inside, leave = threading.Event(), threading.Event()

    def hold() -> None:
        with enter():
            inside.set()
            leave.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert inside.wait(10)
        yield
    finally:
        leave.set()
        holder.join(30)

"""A bounded wait for the JSONL ledger's lock file (``<file>.lock``).

Writes hold an exclusive ``flock`` on the lock file and reads a shared one (``jsonl``). A process
that holds it and stops answering (stopped by a debugger or ``SIGSTOP``, swapped out, stuck on a
hung network mount) made every other process's open, read and write wait forever. The wait is
now bounded by the backend option ``lock_timeout`` (seconds, default ``DEFAULT_LOCK_TIMEOUT``;
``None`` waits without a bound, as before): past it, the call is refused with an
``EventBackendError`` naming the lock file, the bound, the process holding the lock when
``/proc/locks`` tells it, and what to do. Nothing was written: the lock is taken before anything.

The lock keeps its semantics (exclusive for writers, shared for readers, the same file). The wait
tries a non-blocking lock (an uncontended lock costs one system call, as a blocking one did),
then waits in the kernel's queue as a blocking ``flock`` did, woken when the lock is released
(``queued``): polling instead (a try every few milliseconds) never found free a lock that a busy,
healthy writer released for microseconds between its sections, and refused after the bound as if
that writer were stuck. The blocking call runs on a helper thread on another open file
description of the lock file (``/proc/self/fd``), moved onto ``fd`` once granted; past the bound
the helper is left to its wait and drops what it gets. Where the lock file cannot be opened again
so, the wait polls, pausing up to ``MAX_PAUSE`` between tries.
"""

from __future__ import annotations

import fcntl
import math
import os
import threading
import time
from pathlib import Path

from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state.processes import locks_on

#: Seconds a lock is waited for by default: generous (a forget rewriting a large ledger holds
#: the exclusive lock for its rewrite and fsyncs), yet not forever.
DEFAULT_LOCK_TIMEOUT = 60.0

#: The longest pause between two tries (seconds): how late a waiter may notice a released lock.
MAX_PAUSE = 0.01


def lock_timeout(value: object) -> float | None:
    """``value`` as a lock wait bound: a number of seconds (0: try once), or None: no bound."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"lock_timeout must be a number of seconds or None; got {value!r}")
    if math.isnan(value) or value < 0:
        raise ValueError(f"lock_timeout must be 0 or more seconds (or None); got {value!r}")
    return float(value)


def holder(fd: int) -> int | None:
    """The process (other than this one) holding a ``flock`` on the file open as ``fd``, as
    ``/proc/locks`` lists it (Linux); None when it cannot be told."""
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    others = [h.pid for h in locks_on(st) if h.kind == "FLOCK" and h.pid != os.getpid()]
    return others[0] if others else None


def take(fd: int, op: int, *, timeout: float | None, lock: Path, location: str) -> None:
    """``flock(fd, op)``, waiting at most ``timeout`` seconds for a lock (``LOCK_SH`` or
    ``LOCK_EX``); an unlock, or no bound, is the plain call."""
    if op == fcntl.LOCK_UN or timeout is None:
        fcntl.flock(fd, op)
        return
    deadline = time.monotonic() + timeout
    pause = 0.0005
    while True:
        try:
            fcntl.flock(fd, op | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                break
        granted = queued(fd, op, left)
        if granted is not None:
            if granted:
                return
            break
        time.sleep(min(pause, left))  # no other open file description: poll
        pause = min(pause * 2, MAX_PAUSE)
    pid = holder(fd)
    by = f"process {pid}" if pid is not None else "another process"
    raise EventBackendError(
        f"{location}: the ledger's lock file {lock} is held by {by}, which did not release it "
        f"within lock_timeout={timeout:g}s; nothing was changed. If that process is stuck "
        f"(stopped, hung on a mount), resume or end it; if its work is long, open with a larger "
        f"lock_timeout (seconds; None waits without a bound) and retry"
    )


def queued(fd: int, op: int, timeout: float) -> bool | None:
    """Wait up to ``timeout`` seconds in the kernel's queue for the lock ``op`` on the file open
    as ``fd``: a blocking ``flock`` on a helper thread, on another open file description of the
    file, which ``fd`` is then made to refer to (``dup2``: the same descriptor, now holding the
    lock). True: granted; False: not within ``timeout`` (the helper waits on and drops what it
    gets); None: the file cannot be opened again so (no ``/proc``), nothing was waited for.

    A lock ``fd`` already holds is dropped first, as a blocking ``flock`` converting it did: held
    on ``fd``, it would make the helper wait for this very process."""
    try:
        fresh = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    if not os.path.samestat(os.fstat(fresh), os.fstat(fd)):
        os.close(fresh)
        return None
    fcntl.flock(fd, fcntl.LOCK_UN)
    guard, done = threading.Lock(), threading.Event()
    outcome: list[BaseException | None] = []
    abandoned = False

    def wait() -> None:
        try:
            fcntl.flock(fresh, op)
            got: BaseException | None = None
        except OSError as exc:
            got = exc
        with guard:
            if abandoned:  # whatever it got is released (explicitly: a child forked
                if got is None:  # meanwhile shares this open file description)
                    fcntl.flock(fresh, fcntl.LOCK_UN)
                os.close(fresh)
            else:
                outcome.append(got)
                done.set()

    threading.Thread(target=wait, name="jsonl-lock-wait", daemon=True).start()
    done.wait(timeout)
    with guard:
        if not outcome:
            abandoned = True
            return False
    if outcome[0] is not None:
        os.close(fresh)
        raise outcome[0]
    os.dup2(fresh, fd, inheritable=False)  # ``fd`` now holds the lock ...
    os.close(fresh)  # ... which this second descriptor of it leaves in place
    return True

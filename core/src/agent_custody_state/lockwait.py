"""A bounded wait for a ``flock``, queued in the kernel, naming the holder when it runs out.

A process that holds a file's ``flock`` and stops answering (stopped by a debugger or
``SIGSTOP``, swapped out, stuck on a hung network mount) made every blocking ``flock`` of the
file in another process wait forever. ``wait`` bounds that wait by a number of seconds (None:
no bound, the plain blocking call). Every lock of a file-based part waits through it: the JSONL
ledger's lock file (``backends.jsonl_lock``, its own error), and the sidecars locked for an
append or a read: the outbox (``stores.outbox_lock``) and the checkpoint notes
(``ledger.appending.append_locked``), refused past the bound with ``LockWaitTimeout``, and a
plugin's own (mem0's pending adds, through ``plugin.lock_exclusive``).

The wait tries a non-blocking lock (an uncontended lock costs one system call, as a blocking one
did), then waits in the kernel's queue as a blocking ``flock`` did, woken when the lock is
released (``queued``): polling instead (a try every few milliseconds) never found free a lock
that a busy, healthy writer released for microseconds between its sections, and refused after
the bound as if that writer were stuck. The blocking call runs on a helper thread on another open
file description of the file (``/proc/self/fd``, opened with the same access mode and flags),
moved onto ``fd`` once granted; past the bound, or after an interrupt (Ctrl-C), the helper is
left to its wait and drops what it gets. Where the file cannot be opened again so, the wait
polls, pausing up to ``MAX_PAUSE``.

Below every layer: the ledger, the backends and the stores wait alike.
"""

from __future__ import annotations

import errno
import fcntl
import math
import os
import threading
import time

from agent_custody_state.processes import locks_on

#: Seconds a lock is waited for by default: generous (a forget rewriting a large ledger holds
#: the JSONL ledger's exclusive lock for its rewrite and fsyncs), yet not forever.
DEFAULT_LOCK_TIMEOUT = 60.0

#: The longest pause between two tries (seconds) where the wait polls.
MAX_PAUSE = 0.01

#: What the reopened descriptor keeps of the caller's (``fcntl.F_GETFL``): writes through it
#: after a queued grant must go where, and as, the caller's did (``O_APPEND``).
_KEPT = os.O_ACCMODE | os.O_APPEND | os.O_NONBLOCK | os.O_SYNC | os.O_DSYNC


class LockWaitTimeout(TimeoutError):
    """Another process held the lock past the bound; ``strerror`` says who, the bound, and what
    to do (an ``OSError``: the sidecars' errors word it as they word a full disk)."""


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


def held_by(fd: int) -> str:
    """Who holds the lock on ``fd``, for an error: ``process <pid>`` or ``another process``."""
    pid = holder(fd)
    return f"process {pid}" if pid is not None else "another process"


def exclusive(fd: int, timeout: float | None) -> None:
    """An exclusive ``flock`` on ``fd``, waited for at most ``timeout`` seconds (``wait``);
    ``LockWaitTimeout`` naming the holder, the bound and what to do when it is not granted."""
    if not wait(fd, fcntl.LOCK_EX, timeout):
        raise LockWaitTimeout(
            errno.ETIMEDOUT,
            f"its lock is held by {held_by(fd)}, which did not release it within "
            f"lock_timeout={timeout:g}s: if that process is stuck (stopped, hung on a mount), "
            "resume or end it",
        )


def wait(fd: int, op: int, timeout: float | None) -> bool:
    """``flock(fd, op)`` for a lock (``LOCK_SH`` or ``LOCK_EX``), waiting at most ``timeout``
    seconds: True when granted, False when not within the bound. No bound, or an unlock, is the
    plain call (True)."""
    if op == fcntl.LOCK_UN or timeout is None:
        fcntl.flock(fd, op)
        return True
    deadline = time.monotonic() + timeout
    pause = 0.0005
    while True:
        try:
            fcntl.flock(fd, op | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
        granted = queued(fd, op, left)
        if granted is not None:
            return granted
        time.sleep(min(pause, left))  # no other open file description: poll
        pause = min(pause * 2, MAX_PAUSE)


def queued(fd: int, op: int, timeout: float) -> bool | None:
    """Wait up to ``timeout`` seconds in the kernel's queue for the lock ``op`` on the file open
    as ``fd``: a blocking ``flock`` on a helper thread, on another open file description of the
    file (the same access mode and flags), which ``fd`` is then made to refer to (``dup2``: the
    same descriptor, now holding the lock). True: granted; False: not within ``timeout`` (the
    helper waits on and drops what it gets, as it does after an interrupt, Ctrl-C: a lock
    granted after it stayed held by this process for good); None: the file cannot be opened
    again so (no ``/proc``), nothing was waited for.

    A lock ``fd`` already holds is dropped first, as a blocking ``flock`` converting it did: held
    on ``fd``, it would make the helper wait for this very process."""
    try:
        flags = fcntl.fcntl(fd, fcntl.F_GETFL) & _KEPT
        fresh = os.open(f"/proc/self/fd/{fd}", flags | os.O_CLOEXEC)
    except OSError:
        return None
    if not os.path.samestat(os.fstat(fresh), os.fstat(fd)):
        os.close(fresh)
        return None
    fcntl.flock(fd, fcntl.LOCK_UN)
    guard, done = threading.Lock(), threading.Event()
    outcome: list[BaseException | None] = []
    abandoned = False

    def helper() -> None:
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

    threading.Thread(target=helper, name="flock-wait", daemon=True).start()
    try:
        done.wait(timeout)
        with guard:
            abandoned = not outcome
        if abandoned:
            return False
        if outcome[0] is not None:
            raise outcome[0]
        os.dup2(fresh, fd, inheritable=False)  # ``fd`` now holds the lock ...
        return True
    except BaseException:  # an interrupt (Ctrl-C) while waiting, or ``dup2`` refused
        with guard:
            abandoned = abandoned or not outcome  # the helper drops what it gets
        if not abandoned and outcome[0] is None:  # granted, yet not handed over: dropped
            fcntl.flock(fresh, fcntl.LOCK_UN)  # (explicitly: a forked child may share it)
        raise
    finally:
        if not abandoned:
            os.close(fresh)  # ... which closing this second descriptor of it leaves in place

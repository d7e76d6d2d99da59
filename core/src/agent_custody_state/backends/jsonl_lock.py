"""A bounded wait for the JSONL ledger's lock file (``<file>.lock``).

Writes hold an exclusive ``flock`` on the lock file and reads a shared one (``jsonl``). A process
that holds it and stops answering (stopped by a debugger or ``SIGSTOP``, swapped out, stuck on a
hung network mount) made every other process's open, read and write wait forever. The wait is
now bounded by the backend option ``lock_timeout`` (seconds, default ``DEFAULT_LOCK_TIMEOUT``;
``None`` waits without a bound, as before): past it, the call is refused with an
``EventBackendError`` naming the lock file, the bound, the process holding the lock when
``/proc/locks`` tells it, and what to do. Nothing was written: the lock is taken before anything.

The lock keeps its semantics (exclusive for writers, shared for readers, the same file). How the
wait is made, queued in the kernel as a blocking ``flock`` is (a busy, healthy writer is waited
for, not polled for), is ``lockwait``'s, shared with the sidecars' locks.
"""

from __future__ import annotations

from pathlib import Path

from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state.lockwait import DEFAULT_LOCK_TIMEOUT as DEFAULT_LOCK_TIMEOUT
from agent_custody_state.lockwait import held_by, wait
from agent_custody_state.lockwait import lock_timeout as lock_timeout


def take(fd: int, op: int, *, timeout: float | None, lock: Path, location: str) -> None:
    """``flock(fd, op)``, waiting at most ``timeout`` seconds for a lock (``LOCK_SH`` or
    ``LOCK_EX``); an unlock, or no bound, is the plain call."""
    if wait(fd, op, timeout):
        return
    raise EventBackendError(
        f"{location}: the ledger's lock file {lock} is held by {held_by(fd)}, which did not "
        f"release it within lock_timeout={timeout:g}s; nothing was changed. If that process is "
        f"stuck (stopped, hung on a mount), resume or end it; if its work is long, open with a "
        f"larger lock_timeout (seconds; None waits without a bound) and retry"
    )

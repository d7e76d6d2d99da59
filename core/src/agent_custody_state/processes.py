"""Whether a process that recorded something still runs: its pid, and the start it recorded.

An outbox entry (``stores.outbox``), an erasure intent (``stores.intents``) and a temporary
(``temporaries``) each name the process that wrote it, so that a later start leaves what a live
process is still working on alone and finishes (or removes) what a dead one left. A pid alone
misleads once it is reused, or after a reboot: ``process_start`` adds the boot id and the
process's start time (Linux ``/proc``). Below every layer: the stores and the top-level helpers
ask it alike.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple


def alive(pid: int, started: str | None = None) -> bool:
    """Whether the process ``pid`` is running (another user's counts as running) and, when
    the entry recorded ``started`` (``process_start``), is the one that wrote it: after a
    reboot, or once the pid is reused, another process holds it, and an entry judged by the
    pid alone stayed "in flight" for good."""
    if pid <= 0:
        return False  # never signal a process group
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # gone, or no pid at all (an edited line)
        return False
    except PermissionError:
        pass  # another user's process: running
    if started is None:
        return True
    now = process_start(pid)
    return now is None or now == started  # unknown here (not Linux): judged by the pid


def process_start(pid: int) -> str | None:
    """``<boot id>:<start time in clock ticks>`` of process ``pid`` (Linux ``/proc``): the
    same only for the same process of the same boot; None where it cannot be read."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
        # Latin-1 maps every byte: the name may hold any bytes (a UTF-8 name cut at 15 bytes
        # inside a character read as UTF-8 failed, and the process had no start at all).
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="latin-1")
        fields = stat[stat.rindex(")") + 2 :].split()  # the name may hold spaces and ")"
        return f"{boot}:{int(fields[19])}"  # field 22, starttime
    except (OSError, ValueError, IndexError):
        return None


_OWN: dict[int, str | None] = {}


def own_start() -> str | None:
    """``process_start`` of this process, read once per process (a forked child reads its own)."""
    pid = os.getpid()
    if pid not in _OWN:
        _OWN[pid] = process_start(pid)
    return _OWN[pid]


class HeldLock(NamedTuple):
    """A lock ``/proc/locks`` lists on a file: ``kind`` ``FLOCK`` or ``POSIX``, ``mode``
    ``READ`` or ``WRITE``, the holder's ``pid`` and, for a POSIX lock, its byte range
    (``end`` None: to the end of the file)."""

    kind: str
    mode: str
    pid: int
    start: int
    end: int | None


def locks_on(st: os.stat_result) -> list[HeldLock]:
    """The locks held on the file ``st`` describes (Linux ``/proc/locks``; waiters left out),
    so an error about a lock held too long can name the process holding it. Empty when it
    cannot be told."""
    try:
        lines = Path("/proc/locks").read_text(encoding="ascii", errors="replace").splitlines()
    except OSError:
        return []
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    held = []
    for line in lines:
        # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" (a waiter's line: "1: -> FLOCK ...")
        fields = line.split()
        if len(fields) < 8 or fields[5] != dev or not fields[4].isdigit():
            continue
        if not fields[6].isdigit() or not (fields[7] == "EOF" or fields[7].isdigit()):
            continue
        end = None if fields[7] == "EOF" else int(fields[7])
        held.append(HeldLock(fields[1], fields[3], int(fields[4]), int(fields[6]), end))
    return held

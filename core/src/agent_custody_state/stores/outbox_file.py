"""The outbox's file: its lines written all or nothing, read back, and its errors worded.

``Outbox`` (``stores.outbox``) keeps what it owes in a JSONL file; this module is that file's
byte level. An append the disk refuses part-way (full, ``EFBIG``, a failed ``fsync``) is cut
back (``appending.append_or_undo``): a half owe line is skipped as "torn by a crash" when
read, but it still sat beside the ledger until the next settle emptied the file. The error
names the outbox and the cause (``OutboxError``): before, an owe that could not be written
reached a memory server's caller as "internal error ... OSError: [Errno 28] No space left
on device", naming no file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from agent_custody_state.ledger.appending import append_or_undo, failure
from agent_custody_state.ledger.backend import EventBackendError


class OutboxError(EventBackendError):
    """The outbox could not be written (or read); the message names the file and the cause."""


def append_lines(fd: int, lines: list[dict[str, Any]], *, sync: bool) -> None:
    """Append ``lines`` (one JSON object a line) in full or not at all; ``OSError`` as raised
    (the file cut back to its length before)."""
    data = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines).encode()
    size = os.fstat(fd).st_size
    if size and os.pread(fd, 1, size - 1) != b"\n":
        data = b"\n" + data  # a line torn by a crash must not swallow this one
    append_or_undo(fd, data, sync=sync)


def read_records(fd: int) -> list[dict[str, Any]]:
    """Every line of the file that is a JSON object, in order."""
    size = os.fstat(fd).st_size
    records = []
    for raw in os.pread(fd, size, 0).splitlines():
        try:
            record = json.loads(raw)
        except ValueError:
            continue  # torn by a crash: an owe never fsynced (its ledger change never ran)
        if isinstance(record, dict):
            records.append(record)
    return records


def outbox_error(doing: str, path: os.PathLike[str] | str, exc: OSError, after: str) -> OutboxError:
    """``OutboxError``: could not ``doing`` the outbox ``path``: the cause; ``after``."""
    return OutboxError(failure(doing, path, exc, after))


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
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        stat = Path(f"/proc/{pid}/stat").read_text()
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

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
from typing import Any

from agent_custody_state.ledger.appending import append_or_undo, failure
from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state.processes import alive as alive
from agent_custody_state.processes import own_start as own_start
from agent_custody_state.processes import process_start as process_start


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

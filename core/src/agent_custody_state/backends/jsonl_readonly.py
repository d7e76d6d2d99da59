"""A JSONL ledger opened read-only (``read_only=True``): what its open may and may not touch.

A read-only open leaves the ledger's folder as it found it, byte for byte and file for file (an
auditor reading a copy, a ledger on a read-only mount): the file must exist (nothing is
created), the ``<file>.lock`` sidecar is used only if it is there, and a torn final line is
ignored, never cut off or recorded (``jsonl_recovery.torn_tail`` with ``exclusive=False``): the
reader sees the complete lines only. Every write section is refused (``JsonlBackend._begin``).
"""

from __future__ import annotations

import os
from pathlib import Path

from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state.ledger.files import open_private


def lock_file(path: Path, lock: Path, location: str, *, read_only: bool) -> int | None:
    """The descriptor of the ledger's lock file ``lock``: created if missing, unless
    ``read_only``; then the ledger ``path`` must exist, and the lock is opened for reading if it
    can be (a shared ``flock`` needs no write access), else None: read without it, as on a
    read-only mount, where no writer can be at work."""
    if not read_only:
        return open_private(lock, os.O_RDWR)[0]
    if not path.is_file():
        raise EventBackendError(
            f"{location}: no such ledger; a read-only open never creates one (check the path)"
        )
    try:
        return os.open(lock, os.O_RDONLY)
    except OSError:
        return None


def refuse_section(read_only: bool, location: str) -> None:
    """Refuse a write section of a backend opened read-only (the ledger refuses its writes
    first; this also stops ``repair`` and any caller of ``transaction`` directly)."""
    if read_only:
        raise EventBackendError(f"{location} is opened read-only; its write sections are refused")

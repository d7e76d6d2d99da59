"""How large a JSONL ledger may be when it opens: the backend holds every event in memory and
parses the whole file at open, so past a size it can no longer open in under a second within
300 MB (issue 15). The limit is a refusal with a way out, not a silent slowdown
(docs/decisions.md).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from agent_custody_state.ledger.backend import EventBackendError

#: The largest file a JSONL ledger opens by default (docs/decisions.md). Every event is held in
#: memory (``EventIndex``: about 5-7 times the file size at peak) and parsed at open (about 20 µs
#: an event), so past this a ledger would no longer open in under a second within 300 MB.
DEFAULT_MAX_MB = 16
#: The environment variable that changes the limit for every JSONL ledger (0: none), so the
#: command line (``export`` a large file to move it to SQLite) can open any file.
MAX_MB_ENV = "AGENT_CUSTODY_JSONL_MAX_MB"

log = logging.getLogger(__name__)


def max_bytes(max_mb: float | None) -> int | None:
    if max_mb is None:
        text = os.environ.get(MAX_MB_ENV, "").strip()
        try:
            max_mb = float(text) if text else DEFAULT_MAX_MB
        except ValueError:
            raise EventBackendError(f"{MAX_MB_ENV}={text!r} is not a number of MB") from None
    return int(max_mb * 1024 * 1024) if max_mb > 0 else None


def check_size(path: Path, location: str, max_mb: float | None = None) -> None:
    """Refuse, before reading anything, a file past the limit: ``max_mb`` (the backend's
    option), else ``AGENT_CUSTODY_JSONL_MAX_MB``, else ``DEFAULT_MAX_MB``; 0 for none."""
    limit = max_bytes(max_mb)
    try:
        size = path.stat().st_size
    except OSError:
        return  # a new ledger, or an error the open reports better
    if limit is not None and size > limit:
        raise EventBackendError(
            f"{location} is {size / 2**20:.1f} MB, beyond the JSONL backend's limit of "
            f"{limit / 2**20:.1f} MB: it keeps every event in memory (about 6 times the file) "
            "and parses the whole file at open. Move the ledger to SQLite or PostgreSQL "
            f"({MAX_MB_ENV}=0 agent-custody-memory export --ledger {location} --out x.jsonl, "
            "then import --from x.jsonl --ledger new.sqlite), or raise the limit: "
            f"{MAX_MB_ENV}=<MB> (0: none) or Ledger(path, max_mb=...)"
        )


def warn_on_crossing(before: int, after: int, location: str, max_mb: float | None = None) -> None:
    """Warn when an append takes the file past the limit: the ledger keeps working while open,
    but will refuse to open next time, so its operator hears it now, not at the next restart."""
    limit = max_bytes(max_mb)
    if limit is not None and before <= limit < after:
        log.warning(
            "%s has grown past the JSONL backend's limit of %.1f MB: it will not open again "
            "without %s=<MB> (0: none); move it to SQLite or PostgreSQL (docs/backends.md)",
            location,
            limit / 2**20,
            MAX_MB_ENV,
        )

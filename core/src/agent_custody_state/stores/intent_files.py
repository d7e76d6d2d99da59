"""The files of erasure intents (``stores.intents``): read safely, checked, and claimed by one
finisher at a time.

An intent is an unsigned file in the certificates folder from which a start issues a *signed*
certificate, so what it holds is checked, not trusted:

- it is read only from a regular file, never through a symbolic link, and at most ``MAX_BYTES``
  (a FIFO named ``.intent-*`` blocked every start for good; a link to ``/dev/zero`` ended it
  with ``MemoryError``);
- its time must be a wire time, its position (when it has one) a number of events, its facts
  a list of texts, and how a value was stored one of the two kinds a certificate knows
  (``plain``, ``crypto-shred``): another kind stopped every start with ``KeyError``, and
  ``crypto-shred`` on a ledger that seals nothing had a plain value certified as sealed
  (``checked_kind``);
- ``claimed`` holds an exclusive ``flock`` on the intent while it is finished: two starts at
  once on one folder (``serve`` and ``forget --config``) both found the certificate missing and
  both issued it (``<id>.json`` and ``<id>.2.json``). The lock goes with its process, so a
  finisher killed part-way never holds one back.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent_custody_state.regularfiles import FLAGS, read_bounded
from agent_custody_state.timeutil import TimeFormatError, format_time, parse_time

#: The largest intent read: a sweep's pass lists its fact ids and how each is stored.
MAX_BYTES = 64 * 1024 * 1024
#: How a value may have been stored (``certificate._METHODS``).
KINDS = frozenset({"plain", "crypto-shred"})


def read_bytes(path: Path) -> bytes:
    """The intent's bytes; ``ValueError`` for a link, a file that is not regular, or one larger
    than ``MAX_BYTES`` (``OSError`` as the OS says it otherwise): ``regularfiles.read_bounded``,
    as a receipt is read."""
    return read_bounded(path, MAX_BYTES, "intents")


def checked_time(value: Any) -> str:
    """The intent's ``at`` in wire form; ``ValueError`` when it is not a time."""
    try:
        return format_time(parse_time(value))
    except (TimeFormatError, TypeError, ValueError) as exc:
        raise ValueError(f"its time {value!r} is not a time ({exc})") from None


def checked_facts(value: Any) -> tuple[str, ...]:
    """The intent's fact ids; ``ValueError`` unless a list of texts."""
    if not isinstance(value, list) or not all(isinstance(f, str) for f in value):
        raise ValueError("its facts are not a list of fact ids")
    return tuple(value)


def checked_position(value: Any) -> int | None:
    """The intent's ``position`` (the ledger's events when it was recorded); None when it has
    none (written before it was recorded); ``ValueError`` unless a count of events."""
    if value is None:
        return None
    if type(value) is not int or value < 0:
        raise ValueError(f"its position {value!r} is not a number of events")
    return value


def checked_kind(kind: str | None, shredding: bool) -> str | None:
    """How a value was stored, as an intent says it, when a certificate can say it: one of
    ``KINDS``, and ``plain`` on a ledger that seals nothing; None otherwise (the caller falls
    back to the ledger's own mode)."""
    if kind not in KINDS or (kind == "crypto-shred" and not shredding):
        return None
    return kind


@contextlib.contextmanager
def claimed(path: Path) -> Iterator[bool]:
    """Whether this process holds the intent ``path`` alone (an exclusive ``flock``, kept for
    the ``with`` block): False when another finisher holds it, or it is gone (finished)."""
    try:
        fd = os.open(path, FLAGS)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        try:
            same = os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except OSError:
            same = False  # removed by the finisher that held it
        yield same
    finally:
        os.close(fd)

"""Temporaries a kill left behind: found by the exact names our writers give them, removed once
they are stale.

A file written whole or not at all is written to a temporary beside it (``.<name>.<pid>.<16
hex>.<suffix>``, ``temporary``) and linked or renamed into place; a process killed between the two (SIGKILL, the
OOM killer, a power cut) left the temporary for good. In a certificates folder it holds a
certificate or an intent; beside a command's ``--out`` file, an export (every value, decrypted
in crypto-shred mode, kept past every later forget).

``remove_stale`` removes one only when all of these hold, so it never takes a file a live
writer is about to link (two servers may share a certificates folder, on one host or several):

- its name matches the writer's pattern in full (anything else in the folder is not ours);
- it is a regular file (never a link, a folder, a FIFO);
- the process its name records is not running on this host (this process's own counts as
  running: another of its threads may be writing it; a pid reused since counts as running too,
  and the temporary waits for a later start);
- it was last written more than ``STALE_AFTER`` ago: another host's pids cannot be asked, and a
  writer links its temporary within moments of writing it.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import stat
import time
from pathlib import Path

from agent_custody_state.processes import alive

log = logging.getLogger(__name__)

#: How old (last written) a temporary must be before a start may remove it: far beyond any
#: write's time, and beyond the clock difference of two hosts sharing a folder.
STALE_AFTER = 3600.0


def temporary(path: Path, suffix: str) -> Path:
    """A new temporary's path for ``path``: ``.<name>.<pid>.<16 hex>.<suffix>`` beside it. The
    pid tells ``remove_stale`` whether its writer still runs; the random part keeps a leftover
    whose pid was reused since from refusing the write (opened with ``O_EXCL``: "File
    exists")."""
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(8)}.{suffix}")


def pattern(name: str, suffix: str) -> re.Pattern[str]:
    """The names of ``temporary``'s temporaries with ``suffix`` for the files whose names the
    regular expression ``name`` matches (``re.escape(path.name)`` for one file), and of those
    written before the random part (``.<name>.<pid>.<suffix>``)."""
    return re.compile(
        rf"\.(?:{name})\.(?P<pid>[0-9]{{1,10}})(?:\.[0-9a-f]{{16}})?\.{re.escape(suffix)}"
    )


def stale(path: Path, pid: int, now: float | None = None) -> bool:
    """Whether the temporary ``path``, written by process ``pid``, is a kill's leftover (see
    the module's rules, after the name's)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode):
        return False
    if (time.time() if now is None else now) - st.st_mtime <= STALE_AFTER:
        return False
    return pid != os.getpid() and not alive(pid)


def remove_stale(folder: Path, pattern: re.Pattern[str]) -> list[Path]:
    """Remove the stale temporaries of ``folder`` whose names ``pattern`` matches in full (its
    group ``pid``: the writer's process); returns those removed. A folder that cannot be listed,
    or a file that cannot be removed, is left as it is (logged): tidying never stops a start or
    a write."""
    removed: list[Path] = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    now = time.time()
    for name in names:
        found = pattern.fullmatch(name)
        path = folder / name
        if found is None or not stale(path, int(found["pid"]), now):
            continue
        try:
            path.unlink()
        except FileNotFoundError:
            continue  # another start removed it first
        except OSError as exc:
            log.warning("could not remove %s, a temporary a kill left: %s", path, exc)
            continue
        removed.append(path)
    if removed:
        log.info("removed %d temporary file(s) a kill left in %s", len(removed), folder)
    return removed

"""What a process forked from this one must not inherit as it is.

A child forked while a thread of its parent held a lock (a write section, a read snapshot, a key
store's query) has that lock held for ever, by a thread that does not exist there: its first
write hung. The state of the section that thread was in (its depth, its appends not yet
committed) is not the child's either. ``watch(owner)`` has ``owner._after_fork()`` called in
every child forked while ``owner`` lives (``os.register_at_fork``), right after the fork, before
any other thread exists there; each owner gives itself new locks and drops what was its
parent's (docs/decisions.md, "A ledger opened before fork()"). ``subprocess`` does not run these
hooks (it forks and execs in C), so only Python-level forks pay for them.
"""

from __future__ import annotations

import os
import weakref
from contextlib import suppress
from typing import Protocol


class Forkable(Protocol):
    def _after_fork(self) -> None: ...


_WATCHED: weakref.WeakSet[Forkable] = weakref.WeakSet()


def watch(owner: Forkable) -> None:
    """Call ``owner._after_fork()`` in every child forked while ``owner`` is alive."""
    _WATCHED.add(owner)


def _after_fork_in_child() -> None:
    for owner in list(_WATCHED):
        with suppress(Exception):  # one owner's failure must not stop the others' reset
            owner._after_fork()


if hasattr(os, "register_at_fork"):  # pragma: no branch - every POSIX system
    os.register_at_fork(after_in_child=_after_fork_in_child)

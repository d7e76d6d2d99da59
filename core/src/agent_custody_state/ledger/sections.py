"""The write section every builtin event backend shares (``ReentrantTransactions``).

``EventBackend.transaction()`` is an exclusive, all-or-nothing section across processes; this
mixin gives a backend that section, re-entrant within one process, on top of four steps the
backend implements. The JSONL, in-memory and SQL backends all use it.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterator
from contextlib import contextmanager, suppress

from agent_custody_state.ledger import forks


class ReentrantTransactions:
    """The write section every builtin backend shares: re-entrant, all-or-nothing.

        A mixin for an ``EventBackend`` (list it first among the bases): it provides
        ``transaction()`` on top of four steps the backend implements (``_begin`` reads
    ``_section_keys``: the keys, None when exclusive; a nested section naming more keys calls
    ``_widen``). The outermost section takes
        ``_lock`` (a re-entrant thread lock) and calls ``_begin`` (take the cross-process lock, catch
        up); a ``_begin`` that raises must leave nothing held, and the section does not start. Then
        the body runs and ``_commit`` makes what it appended durable; if either raised, ``_rollback``
        drops it and the error propagates. ``_end`` runs last after every started section (release
        the cross-process lock). A nested section only counts its depth. ``append`` and ``forget``
        call ``_require_transaction`` first. Call ``_init_transactions`` from ``__init__``; the
        backend may take ``_lock`` for its own reads too.
    """

    _lock: threading.RLock
    _depth: int
    #: The keys of the current section (``transaction(keys=...)``), None when exclusive.
    _section_keys: frozenset[str] | None

    def _init_transactions(self) -> None:
        self._lock = threading.RLock()
        self._depth = 0
        self._section_keys = None
        forks.watch(self)

    def _after_fork(self) -> None:
        """In a child just forked (``forks``): a new lock (one a thread of the parent held is
        never released here), and a section that thread was inside dropped as a rollback drops
        it (its appends were not committed as far as this process can know; the file or
        database holds what the parent commits). A section the forking thread itself was in is
        not continued: its appends are refused (``_require_transaction``)."""
        self._lock = threading.RLock()
        if self._depth:
            with suppress(Exception):
                self._rollback()
        self._depth, self._section_keys = 0, None

    def _widen(self, keys: frozenset[str] | None) -> None:
        """A nested section named keys: a backend locking keys must hold them too (or refuse,
        for an exclusive section inside a keyed one)."""

    def _begin(self) -> None:
        """Start the outermost section (e.g. take the file lock, or ``BEGIN``)."""

    def _commit(self) -> None:
        """Make what the section appended durable (fsync, ``COMMIT``)."""

    def _rollback(self) -> None:
        """Drop what the section appended; called when the body or ``_commit`` raised."""

    def _end(self) -> None:
        """Always called after a started outermost section, after commit or rollback."""

    @contextmanager
    def transaction(self, keys: Collection[str] | None = None) -> Iterator[None]:
        with self._lock:
            wanted = None if keys is None else frozenset(keys)
            if self._depth:
                if self._section_keys is not None and (
                    wanted is None or not wanted <= self._section_keys
                ):
                    self._widen(wanted)
                    self._section_keys = None if wanted is None else self._section_keys | wanted
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            self._section_keys = wanted
            try:
                self._begin()
            except BaseException:
                self._section_keys = None
                raise
            self._depth = 1
            try:
                try:
                    yield
                    self._commit()
                except BaseException:
                    self._rollback()
                    raise
            finally:
                self._depth = 0
                self._section_keys = None
                self._end()

    def _require_transaction(self) -> None:
        if not self._depth:
            raise RuntimeError("append/forget must run inside backend.transaction()")

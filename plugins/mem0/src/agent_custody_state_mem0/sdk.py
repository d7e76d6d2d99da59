"""Importing ``mem0`` safely: its environment must be set first, and its logs guarded.

mem0 reads ``MEM0_TELEMETRY`` when it is imported (on by default, sending PostHog events to
``us.i.posthog.com``) and writes ``$MEM0_DIR/config.json`` (default ``~/.mem0``). A custody
server must not phone home by accident, so both are decided here, before the first import.

mem0's local ``Memory`` logs the text it stores, in f-strings (``Creating memory with
data='<text>'`` at DEBUG, ``Updating memory with data=...`` at INFO, ``Skipping duplicate memory
(hash match): <text>``), and its vector stores and client log from loggers of their own:
``guard_mem0_loggers`` guards every ``mem0`` logger (``plugin.guard_logger``), so the text a
store is sending (``plugin.withholding``) is masked in their records, as are secrets. A logger
mem0 makes later (a module it imports on the first add or search: ``mem0.utils.spacy_models``)
is covered by a handler on the ``mem0`` logger, which every record of the loggers below reaches
before any handler above (the root's) does.
"""

from __future__ import annotations

import getpass
import importlib
import logging
import os
import sys
import tempfile
from types import ModuleType

from agent_custody_state.plugin import guard_logger

from .settings import Mem0Settings

log = logging.getLogger(__name__)


def _default_dir() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # no passwd entry in some containers
        user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    return os.path.join(tempfile.gettempdir(), f"agent-custody-mem0-{user}")


def mem0_folder(settings: Mem0Settings) -> str:
    """The folder this store keeps its own files in, beside mem0's (created 0700 if missing):
    ``mem0_dir``, else ``MEM0_DIR``, else the per-user default under the temp directory."""
    directory = settings.mem0_dir or os.environ.get("MEM0_DIR") or _default_dir()
    os.makedirs(directory, mode=0o700, exist_ok=True)
    return directory


def import_mem0(settings: Mem0Settings) -> ModuleType:
    """Set ``MEM0_TELEMETRY`` and ``MEM0_DIR`` as the settings say, then import ``mem0``."""
    wanted = "true" if settings.telemetry else "false"
    if "mem0" in sys.modules:
        # Too late to change the flag; say so if it disagrees rather than pretend.
        if os.environ.get("MEM0_TELEMETRY", "true").lower() != wanted:
            log.warning("mem0 was imported before this store; MEM0_TELEMETRY stays as it was")
    else:
        os.environ["MEM0_TELEMETRY"] = wanted
        if settings.mem0_dir:
            os.environ["MEM0_DIR"] = settings.mem0_dir
        directory = os.environ.setdefault("MEM0_DIR", _default_dir())
        os.makedirs(directory, mode=0o700, exist_ok=True)
    return importlib.import_module("mem0")


class _GuardBelow(logging.Handler):
    """On the ``mem0`` logger: a record of a logger below it that is not guarded (made after
    ``guard_mem0_loggers`` ran) gets the ``mem0`` logger's guard before the handlers of the
    loggers above see it (a handler may change a record: the same record goes on to them).
    It writes nothing; a record no other handler takes goes to ``logging.lastResort``, as it
    would without this handler (warnings of a program with no logging set up stay on stderr)."""

    def handle(self, record: logging.LogRecord) -> bool:
        guards = logging.getLogger("mem0").filters
        own = logging.getLogger(record.name).filters
        for guard in guards:
            # a guarded logger's record is already masked; the guard is a ``logging.Filter``
            if guard not in own and isinstance(guard, logging.Filter):
                guard.filter(record)
        if not _handled_elsewhere(record, self):
            last = logging.lastResort
            if last is not None and record.levelno >= last.level:
                last.handle(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:  # pragma: no cover - handle() overrides
        pass


def _handled_elsewhere(record: logging.LogRecord, handler: logging.Handler) -> bool:
    """Whether ``Logger.callHandlers`` finds a handler other than ``handler`` for ``record``
    (from the record's logger up while ``propagate`` holds; a handler counts whatever its
    level, so ``logging.lastResort`` is not used)."""
    logger: logging.Logger | None = logging.getLogger(record.name)
    while logger is not None:
        if any(h is not handler for h in logger.handlers):
            return True
        logger = logger.parent if logger.propagate else None
    return False


def guard_mem0_loggers() -> None:
    """Guard ``mem0`` and every logger below it that exists now, and put ``_GuardBelow`` first
    among the ``mem0`` logger's handlers for those made later: call it once the backend is
    built (a vector store's, an embedder's logger is made when ``Memory`` imports its module).
    A logger's filter sees only its own records, so each one that exists is guarded."""
    names = [n for n in logging.root.manager.loggerDict if n.split(".", 1)[0] == "mem0"]
    for name in ["mem0", "mem0.memory.main", *names]:
        guard_logger(name)
    parent = logging.getLogger("mem0")
    if not any(isinstance(h, _GuardBelow) for h in parent.handlers):
        parent.handlers.insert(0, _GuardBelow())  # first: before a handler of the program's

"""Importing ``mem0`` safely: its environment must be set first, and its logs guarded.

mem0 reads ``MEM0_TELEMETRY`` when it is imported (on by default, sending PostHog events to
``us.i.posthog.com``) and writes ``$MEM0_DIR/config.json`` (default ``~/.mem0``). A custody
server must not phone home by accident, so both are decided here, before the first import.

mem0's local ``Memory`` logs the text it stores, in f-strings (``Creating memory with
data='<text>'`` at DEBUG, ``Updating memory with data=...`` at INFO, ``Skipping duplicate memory
(hash match): <text>``), and its vector stores and client log from loggers of their own:
``guard_mem0_loggers`` guards every ``mem0`` logger (``plugin.guard_logger``), so the text a
store is sending (``plugin.withholding``) is masked in their records, as are secrets.
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


def guard_mem0_loggers() -> None:
    """Guard ``mem0`` and every logger below it that exists now: call it once the backend is
    built (a vector store's, an embedder's logger is made when ``Memory`` imports its module).
    A logger's filter sees only its own records, so each one is guarded."""
    names = [n for n in logging.root.manager.loggerDict if n.split(".", 1)[0] == "mem0"]
    for name in ["mem0", "mem0.memory.main", *names]:
        guard_logger(name)

"""Importing ``mem0`` safely: its environment must be set first.

mem0 reads ``MEM0_TELEMETRY`` when it is imported (on by default, sending PostHog events to
``us.i.posthog.com``) and writes ``$MEM0_DIR/config.json`` (default ``~/.mem0``). A custody
server must not phone home by accident, so both are decided here, before the first import.
"""

from __future__ import annotations

import getpass
import importlib
import logging
import os
import sys
import tempfile
from types import ModuleType

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

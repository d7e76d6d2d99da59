"""The command line's errors (re-exported by ``cli.common``), in a module of their own so that
every part of the command line can raise them without importing ``common``."""

from __future__ import annotations


class CliError(Exception):
    """A failure reported as ``error: <message>`` with exit status 1."""


class UsageError(CliError):
    """A flag value of the wrong form (a time without its offset, a port out of range):
    reported like any error, with exit status 2 as SPEC section 5 gives usage errors."""

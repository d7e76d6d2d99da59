"""What every command shares: the one-line error, opening a ledger, printing a report."""

from __future__ import annotations

import argparse
from typing import Any


class CliError(Exception):
    """A failure reported as ``error: <message>`` with exit status 1."""


def open_ledger(args: argparse.Namespace, **kwargs: Any) -> Any:
    """The ledger named by ``--ledger`` (imported lazily: ``--help`` stays fast)."""
    from agent_custody_state.ledger.ledger import Ledger

    return Ledger(args.ledger, **kwargs)

"""Passage writes that ended without Letta's answer: where its SDK's errors carry the status.

A create the client stopped waiting for may still be running on the server (it embeds the
text, then inserts the passage): the store keeps the core's record of such writes
(``agent_custody_state.plugin.Unanswered``) and declares ``settle_seconds`` so that a restart
keeps the cleanup owed too. The core reads ``httpx`` errors and causes; this module only says
that ``letta_client.APIStatusError`` carries the HTTP status Letta answered.
"""

from __future__ import annotations

from letta_client import APIStatusError

__all__ = ["letta_status"]


def letta_status(exc: BaseException) -> int | None:
    """The HTTP status Letta answered, when ``exc`` is the SDK's status error; else None."""
    return exc.status_code if isinstance(exc, APIStatusError) else None

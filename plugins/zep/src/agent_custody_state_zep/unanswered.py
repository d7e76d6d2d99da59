"""Episode adds that ended without Zep's answer: where this plugin's errors carry the status.

An add the client stopped waiting for may still create its episode in Zep: the store keeps the
core's record of such adds (``agent_custody_state.plugin.Unanswered``) and declares
``settle_seconds`` so that a restart keeps the cleanup owed too. The core reads ``httpx``
errors and causes; this module only says that ``ZepRequestError.status`` is the HTTP status
Zep answered.
"""

from __future__ import annotations

from agent_custody_state.plugin import may_have_landed as landed

from .api import ZepRequestError

__all__ = ["may_have_landed", "zep_status"]


def zep_status(exc: BaseException) -> int | None:
    """The HTTP status Zep answered, when ``exc`` is a ``ZepRequestError`` that has one."""
    return exc.status if isinstance(exc, ZepRequestError) else None


def may_have_landed(exc: BaseException) -> bool:
    """Whether a failed add may still have created its episode (the core's rule, with
    ``zep_status``): a 4xx or a connection never made did not; anything else may have."""
    return landed(exc, status_of=zep_status)

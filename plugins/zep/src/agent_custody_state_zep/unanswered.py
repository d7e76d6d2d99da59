"""Episode adds that ended without Zep's answer: where this plugin's errors carry the status.

An add the client stopped waiting for may still create its episode in Zep: the store keeps the
core's record of such adds (``agent_custody_state.plugin.Unanswered``) and declares
``settle_seconds`` so that a restart keeps the cleanup owed too. The core reads ``httpx``
errors and causes; this module says that ``ZepRequestError.status`` is the HTTP status Zep
answered, which failed adds the store may send again (``retry_add``), and how long Zep asked
it to wait first (``retry_after``).
"""

from __future__ import annotations

import re
import time
from datetime import UTC
from email.utils import parsedate_to_datetime

from agent_custody_state.plugin import may_have_landed as landed

from .api import ZepRequestError

__all__ = ["RETRIED_STATUSES", "may_have_landed", "retry_add", "retry_after", "zep_status"]

_SECONDS = re.compile(r"\s*([0-9]+)\s*")

#: The answers to an add that are worth sending it again for (the SDK's own retry set, less
#: the 5xx, which may have stored the episode): the request was not taken, nothing is stored.
RETRIED_STATUSES = frozenset({408, 409, 429})


def zep_status(exc: BaseException) -> int | None:
    """The HTTP status Zep answered, when ``exc`` is a ``ZepRequestError`` that has one."""
    return exc.status if isinstance(exc, ZepRequestError) else None


def may_have_landed(exc: BaseException) -> bool:
    """Whether a failed add may still have created its episode (the core's rule, with
    ``zep_status``): a 4xx or a connection never made did not; anything else may have."""
    return landed(exc, status_of=zep_status)


def retry_add(exc: BaseException) -> bool:
    """Whether a failed add may be sent again: its failure proves no episode was stored
    (``may_have_landed`` is false) and may pass (a ``RETRIED_STATUSES`` answer, or a connection
    never made). A 5xx, a timeout or a dropped connection may have stored it: a second add
    would be a second episode, so the add is not repeated; nor is a refusal such as a 400."""
    if may_have_landed(exc):
        return False
    # Not landed: the first status in the chain is a 4xx, or a connection was never made.
    status = next(filter(None, map(zep_status, _chain(exc))), None)
    return status is None or status in RETRIED_STATUSES


def retry_after(exc: BaseException, now: float | None = None) -> float | None:
    """The seconds Zep's answer asked to wait before the request is sent again (its
    ``Retry-After`` header, RFC 9110 §10.2.3: a number of seconds, or an HTTP date, 0 once
    past, measured from ``now``, the clock's by default); ``None`` without a header that reads
    as either."""
    value = next((e.retry_after for e in _chain(exc) if isinstance(e, ZepRequestError)), None)
    if value is None:
        return None
    seconds = _SECONDS.fullmatch(value)
    if seconds is not None:
        return float(seconds.group(1))
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None  # neither form: as if Zep had not asked
    if when.tzinfo is None:  # the obsolete asctime form: HTTP dates are in GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes (``raise ... from``), each once."""
    chain: list[BaseException] = []
    link: BaseException | None = exc
    while link is not None and all(link is not seen for seen in chain):
        chain.append(link)
        link = link.__cause__
    return chain

"""Episode adds that ended without Zep's answer, which Zep may still be finishing.

An add the client stopped waiting for (a timeout, a dropped connection, a gateway's 5xx, after
the SDK's retries) may still be running in Zep: the episode is created, and its ingestion
queued, whatever became of the request. Until it is, the episode list does not show it, so
``held_ids`` must not answer "none" for that fact. :class:`Unanswered` remembers, per fact id,
when such an add was sent; the store asks it before trusting an empty lookup, for
``settle_seconds`` after the add (or until a copy turns up, which shows the add landed).

The record lives in this process only: a restarted store no longer knows of the add, so a
lookup after a restart that comes before Zep finished can still miss it (docs/stores.md,
"A put that fails after the vendor kept the fact").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import httpx

from .api import ZepRequestError

__all__ = ["Unanswered", "may_have_landed"]


def may_have_landed(exc: BaseException) -> bool:
    """Whether a failed add may still have created its episode in Zep.

    A 4xx is Zep's refusal (nothing created); a connection never made sent nothing. Every other
    failure (no answer in time, a dropped connection, a 5xx, which a gateway also answers while
    Zep keeps working) leaves the outcome open.
    """
    if isinstance(exc, ZepRequestError) and exc.status is not None:
        return exc.status >= 500
    return not isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)


class Unanswered:
    """Fact ids whose episode add ended without an answer, and when it was sent."""

    def __init__(
        self, settle_seconds: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.settle_seconds = settle_seconds
        self._clock = clock
        self._sent: dict[str, float] = {}
        self._lock = threading.Lock()

    def note(self, fact_id: str, sent: float) -> None:
        """Remember that an add of ``fact_id`` sent at ``sent`` (this clock) got no answer."""
        with self._lock:
            self._sent[fact_id] = max(sent, self._sent.get(fact_id, sent))

    def now(self) -> float:
        return self._clock()

    def open_for(self, fact_id: str) -> float | None:
        """Seconds since such an add of ``fact_id``, while it may still land; else ``None``."""
        with self._lock:
            sent = self._sent.get(fact_id)
            if sent is None:
                return None
            age = self._clock() - sent
            if age >= self.settle_seconds:
                del self._sent[fact_id]
                return None
            return age

    def landed(self, fact_id: str) -> None:
        """A copy of ``fact_id`` turned up: the add it was waiting for is done."""
        with self._lock:
            self._sent.pop(fact_id, None)

"""Passage writes that ended without Letta's answer, which the server may still be finishing.

A create the client stopped waiting for (a timeout, a dropped connection, a gateway's 5xx) may
still be running on the server: it embeds the text, then inserts the passage, whatever became of
the request. Until it has, no search finds the passage, so ``held_ids`` must not answer "none"
for that fact. :class:`Unanswered` remembers, per fact id, when such a write was sent; the store
asks it before trusting an empty lookup, for ``settle_seconds`` after the write (or until a copy
turns up, which shows the write landed).

The record lives in this process only: a restarted store no longer knows of the write, so a
lookup after a restart that comes before the server finished can still miss it (docs/stores.md,
"A put that fails after the vendor kept the fact").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import httpx
from letta_client import APIConnectionError, APIStatusError

__all__ = ["Unanswered", "may_have_landed"]


def may_have_landed(exc: BaseException) -> bool:
    """Whether a failed create may still have written its passage on the server.

    A 4xx is the server's refusal (nothing written); a connection never made sent nothing.
    Every other failure (no answer in time, a dropped connection, a 5xx, which a gateway also
    answers while the server keeps working) leaves the outcome open.
    """
    if isinstance(exc, APIStatusError):
        return exc.status_code >= 500
    if isinstance(exc, APIConnectionError):
        return not isinstance(exc.__cause__, httpx.ConnectError | httpx.ConnectTimeout)
    return True


class Unanswered:
    """Fact ids whose passage write ended without an answer, and when it was sent."""

    def __init__(
        self, settle_seconds: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.settle_seconds = settle_seconds
        self._clock = clock
        self._sent: dict[str, float] = {}
        self._lock = threading.Lock()

    def note(self, fact_id: str, sent: float) -> None:
        """Remember that a write of ``fact_id`` sent at ``sent`` (this clock) got no answer."""
        with self._lock:
            self._sent[fact_id] = max(sent, self._sent.get(fact_id, sent))

    def now(self) -> float:
        return self._clock()

    def open_for(self, fact_id: str) -> float | None:
        """Seconds since such a write of ``fact_id``, while it may still land; else ``None``."""
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
        """A copy of ``fact_id`` turned up: the write it was waiting for is done."""
        with self._lock:
            self._sent.pop(fact_id, None)

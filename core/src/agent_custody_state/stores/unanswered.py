"""Writes a store stopped waiting for, which the vendor may still be finishing.

A ``put`` the client stopped waiting for (a timeout, a dropped connection, a gateway's 5xx, a
cancel) may still be running at the vendor: the server embeds the text, then stores it,
whatever became of the request. Until it has, no lookup shows the copy, so the store's
``held_ids`` must not answer "none" for that fact (an empty list is a promise: ``base.Store``).

:class:`Unanswered` remembers, per fact id, when such a write was sent: the store wraps its
vendor call in :meth:`Unanswered.sending`, and asks :meth:`Unanswered.doubt` before trusting an
empty lookup, for ``settle_seconds`` after the write (or until a copy turns up, which shows the
write landed); meanwhile ``held_ids`` raises and the cleanup stays owed in the outbox. The
record lives in this process; across a restart the store's ``settle_seconds`` attribute
(``base.settle_seconds_of``) keeps the outbox's entry owed for as long (``orphan_resume``).

:func:`may_have_landed` tells, for an HTTP client over ``httpx``, whether a failed write may
have landed: a 4xx is the vendor's refusal (nothing stored) and a connection never made sent
nothing; every other failure leaves the outcome open. An SDK whose errors carry the status in
their own type passes ``status_of`` to say where.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["StatusOf", "Unanswered", "http_status", "may_have_landed"]

#: The HTTP status an exception carries, or None when it is not an answer from the server.
StatusOf = Callable[[BaseException], int | None]


def http_status(exc: BaseException) -> int | None:
    """The status of an ``httpx.HTTPStatusError`` (``raise_for_status``); else None."""
    import httpx  # not at the top: importing ``plugin`` stays cheap (conformance PH-2)

    return exc.response.status_code if isinstance(exc, httpx.HTTPStatusError) else None


def may_have_landed(
    exc: BaseException | None = None,
    *,
    status: int | None = None,
    status_of: StatusOf = http_status,
) -> bool:
    """Whether a failed write (``exc`` raised, or answered HTTP ``status``) may still have
    stored its copy at the vendor.

    ``exc`` and its causes (``raise ... from``: a ``StoreError`` wrapping the SDK's error) are
    read in turn: the first that carries a status (``status_of``) decides, 5xx open and 4xx
    not; a connection never made (``httpx.ConnectError``, ``ConnectTimeout``) is not written.
    Anything else (no answer in time, a dropped connection, a cancel) leaves the outcome open.
    """
    if status is not None:
        return status >= 500
    import httpx  # not at the top: importing ``plugin`` stays cheap (conformance PH-2)

    never_sent = (httpx.ConnectError, httpx.ConnectTimeout)  # the request never reached it
    seen: set[int] = set()
    link = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        answered = status_of(link)
        if answered is not None:
            return answered >= 500
        if isinstance(link, never_sent):
            return False
        link = link.__cause__
    return True


class Unanswered:
    """Fact ids whose write ended without the vendor's answer, and when it was sent."""

    def __init__(
        self, settle_seconds: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.settle_seconds = settle_seconds
        self._clock = clock
        self._sent: dict[str, float] = {}
        self._lock = threading.Lock()

    def now(self) -> float:
        return self._clock()

    def note(self, fact_id: str, sent: float) -> None:
        """Remember that a write of ``fact_id`` sent at ``sent`` (this clock) got no answer."""
        with self._lock:
            self._sent[fact_id] = max(sent, self._sent.get(fact_id, sent))

    @contextmanager
    def sending(self, fact_id: str, *, status_of: StatusOf = http_status) -> Iterator[float]:
        """Around a write of ``fact_id``: when it raises what may have landed
        (``may_have_landed``), note it. Yields the time it was sent, for a write the caller
        finds unanswered after the call returned (a 5xx answered without raising)."""
        sent = self.now()
        try:
            yield sent
        except BaseException as exc:  # a cancel too: the vendor goes on with the write
            if may_have_landed(exc, status_of=status_of):
                self.note(fact_id, sent)
            raise

    def open_for(self, fact_id: str) -> float | None:
        """Seconds since such a write of ``fact_id``, while it may still land; else None."""
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

    def doubt(self, fact_id: str, held: list[str]) -> float | None:
        """What a lookup that found ``held`` may answer: None when it may be trusted (a copy
        turned up, which ends the doubt, or no write is open), else the seconds since the
        open write (``held_ids`` raises then, saying to look again ``settle_seconds - age``
        later)."""
        if held:
            self.landed(fact_id)
            return None
        return self.open_for(fact_id)

"""Twenty-second review, fresh eyes: the error of an add refused for a long ``Retry-After``
says how long Zep asked, truthfully.

The wait was printed with ``{asked:.0f}``: an HTTP date 30.4 s ahead read "Zep asked to wait
30s ..., longer than max_retry_after (30s)", a contradiction, and a number of seconds too large
for a float (a 400-digit header reads as ``inf``) "Zep asked to wait infs". Now whole seconds
are rounded up, and ``inf`` is said in words. Each test fails without the fix.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

import agent_custody_state_zep.unanswered as unanswered
from agent_custody_state.stores import StoreError
from agent_custody_state_zep.api import ZepRequestError
from agent_custody_state_zep.store import ZepStore

NOW = 1_700_000_000.0  # a whole second: the HTTP date below is 30.4 s after NOW - 0.4


def refused(store: ZepStore, header: str) -> str:
    """The error ``_retry_delay`` raises for a 429 answered with ``Retry-After: header``."""
    throttled = StoreError(store.name, "episode add failed: HTTP 429 rate_limited")
    throttled.__cause__ = ZepRequestError("HTTP 429", status=429, retry_after=header)
    with pytest.raises(StoreError) as raised:
        store._retry_delay(throttled, 0)
    return str(raised.value)


@pytest.fixture
def store() -> ZepStore:
    made = ZepStore.__new__(ZepStore)  # only what ``_retry_delay`` reads
    made.name, made.max_retry_after, made.add_retry_delay = "zep", 30.0, 1.0
    return made


def test_a_date_just_past_the_bound_is_not_said_to_be_the_bound(
    store: ZepStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(unanswered, "time", SimpleNamespace(time=lambda: NOW - 0.4))
    date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(NOW + 30))
    text = refused(store, date)  # 30.4 s ahead: more than 30
    assert "Zep asked to wait 31s" in text, text
    assert "max_retry_after (30s)" in text


def test_a_number_too_large_for_a_float_is_said_in_words(store: ZepStore) -> None:
    text = refused(store, "9" * 400)
    assert "infs" not in text and "inf " not in text, text
    assert "Zep asked to wait an unbounded time" in text
    assert "nothing was stored" in text


def test_whole_seconds_read_as_sent(store: ZepStore) -> None:
    assert "Zep asked to wait 120s before" in refused(store, "120")

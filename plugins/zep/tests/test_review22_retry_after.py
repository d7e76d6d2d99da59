"""An episode add Zep refused with ``Retry-After`` waits as long as Zep asked (twenty-second
review). The store's back-off (1 s doubling, at most 8 s) ignored the header: a 429 asking for
30 s was sent again after 1 s and 2 s, using up the retries while Zep asked to wait. Now the
wait is the longer of the two, up to ``max_retry_after``; an answer asking for longer fails the
add at once, saying how long Zep asked. Each test fails without the fix.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from types import SimpleNamespace

import pydantic
import pytest

import agent_custody_state_zep.store as store_module
from agent_custody_state.stores import StoreError
from agent_custody_state_conformance.stores import make_fact
from agent_custody_state_zep.api import ZepRequestError
from agent_custody_state_zep.settings import ZepSettings
from agent_custody_state_zep.store import ZepStore
from agent_custody_state_zep.testing import FakeZep
from agent_custody_state_zep.unanswered import retry_add, retry_after

pytestmark = pytest.mark.anyio

MakeStore = Callable[..., ZepStore]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The store's waits before an add is sent again, recorded instead of slept."""
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(store_module, "anyio", SimpleNamespace(sleep=sleep))
    return slept


def http_date(seconds_from_now: float) -> str:
    return format_datetime(datetime.now(UTC) + timedelta(seconds=seconds_from_now), True)


async def test_an_add_waits_as_long_as_retry_after_asks(
    fake: FakeZep, make_store: MakeStore, waits: list[float]
) -> None:
    store, fact = make_store(), make_fact()  # back-off 1 s, then 2 s; two retries
    fake.throttle_adds, fake.retry_after = 2, "5"
    episode = await store.put(fact)
    assert waits == [5.0, 5.0]
    assert len(fake.requests_for("add")) == 3
    assert await store.held_ids(fact) == [episode]


async def test_the_back_off_stays_when_it_is_longer(
    fake: FakeZep, make_store: MakeStore, waits: list[float]
) -> None:
    store = make_store()
    fake.throttle_adds, fake.retry_after = 2, "1"
    await store.put(make_fact())
    assert waits == [1.0, 2.0]


async def test_an_http_date_is_waited_for(
    fake: FakeZep, make_store: MakeStore, waits: list[float]
) -> None:
    store = make_store()
    fake.throttle_adds, fake.retry_after = 1, http_date(20)
    await store.put(make_fact())
    (wait,) = waits
    assert 15 < wait <= 20


async def test_a_longer_wait_than_max_retry_after_fails_the_add_at_once(
    fake: FakeZep, make_store: MakeStore, waits: list[float]
) -> None:
    store, fact = make_store(), make_fact()  # max_retry_after: 30 s by default
    fake.throttle_adds, fake.retry_after = 2, "120"
    with pytest.raises(StoreError) as refused:
        await store.put(fact)
    text = str(refused.value)
    assert "HTTP 429" in text and "Zep asked to wait 120s" in text
    assert "max_retry_after (30s)" in text and "nothing was stored" in text
    assert isinstance(refused.value.__cause__, StoreError)  # the 429 itself
    assert waits == [] and len(fake.requests_for("add")) == 1
    assert await store.held_ids(fact) == []  # a 429 stored nothing: no doubt to wait out


async def test_max_retry_after_is_a_setting(
    fake: FakeZep, make_store: MakeStore, waits: list[float]
) -> None:
    fake.throttle_adds, fake.retry_after = 1, "120"
    await make_store(max_retry_after=300).put(make_fact())
    assert waits == [120.0]
    fake.throttle_adds, fake.retry_after = 1, "2"
    with pytest.raises(StoreError, match="Zep asked to wait 2s"):
        await make_store(max_retry_after=1).put(make_fact())
    assert "Retry-After" in (ZepSettings.model_fields["max_retry_after"].description or "")
    with pytest.raises(pydantic.ValidationError, match="max_retry_after"):
        ZepSettings(graph_id="g", max_retry_after=-1)


async def test_a_real_wait_through_the_sdk(fake: FakeZep, make_store: MakeStore) -> None:
    """End to end over loopback, the real sleep: ``Retry-After: 1`` holds the second add back
    a second, where the back-off alone (10 ms here) would have sent it at once."""
    store = make_store()
    store.add_retry_delay = 0.01
    fake.throttle_adds, fake.retry_after = 1, "1"
    started = time.monotonic()
    await store.put(make_fact())
    assert time.monotonic() - started >= 0.95
    assert len(fake.requests_for("add")) == 2


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("7", 7.0),
        (" 12 ", 12.0),
        ("0", 0.0),
        (http_date(-60), 0.0),
        ("soon", None),
        ("-3", None),
        ("1.5", None),
        (None, None),
    ],
)
def test_retry_after_reads_both_forms(header: str | None, seconds: float | None) -> None:
    wrapped = StoreError("zep", "episode add failed")
    wrapped.__cause__ = ZepRequestError("HTTP 429", status=429, retry_after=header)
    assert retry_after(wrapped) == seconds


def test_retry_after_of_a_date_is_measured_from_now() -> None:
    failure = ZepRequestError("HTTP 429", status=429, retry_after="Thu, 01 Jan 1970 00:01:40 GMT")
    assert retry_after(failure, now=40.0) == 60.0
    obsolete = ZepRequestError("HTTP 429", status=429, retry_after="Thu Jan  1 00:01:40 1970")
    assert retry_after(obsolete, now=40.0) == 60.0


def test_a_503_asking_to_wait_is_still_not_sent_again() -> None:
    """A 5xx may have stored the episode: ``Retry-After`` does not make a second add safe."""
    assert retry_add(ZepRequestError("HTTP 503", status=503, retry_after="1")) is False

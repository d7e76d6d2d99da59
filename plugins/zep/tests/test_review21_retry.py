"""An episode add is never sent twice when the first may have stored it.

Zep does not de-duplicate episodes: the SDK's automatic retry of an add answered 504 (or cut
off) while Zep still stores it created a second episode at once, ``put`` answered with that
one, and the first landed later as a copy no ledger event records. The add now goes out once
from the SDK; the store sends it again itself only after a failure that proves nothing was
stored (a 429, a connection never made). Reads and deletes keep the SDK's ``max_retries``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest
from test_conformance import FakeBackdoor

from agent_custody_state.stores import StoreError
from agent_custody_state_conformance.stores import LateWrite, make_fact
from agent_custody_state_conformance.stores.late import LateRules
from agent_custody_state_zep.api import ZepRequestError
from agent_custody_state_zep.store import ZepStore
from agent_custody_state_zep.testing import FakeZep
from agent_custody_state_zep.unanswered import retry_add

pytestmark = pytest.mark.anyio

MakeStore = Callable[..., ZepStore]
DOUBT = "ended without Zep's answer"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def episodes_of(fake: FakeZep, fact_id: str) -> list[str]:
    with fake.lock:
        return [u for u, e in fake.items.items() if (e["metadata"] or {}).get("factId") == fact_id]


def quick(store: ZepStore) -> ZepStore:
    store.add_retry_delay = 0.01  # the store's own back-off, not the SDK's (1 s and more)
    return store


async def test_an_add_answered_504_is_not_sent_again(fake: FakeZep, make_store: MakeStore) -> None:
    store, fact = make_store(), make_fact()  # the default max_retries (2)
    fake.store_later = 1  # the gateway answers 504; Zep creates the episode anyway
    with pytest.raises(StoreError, match="episode add failed: .*HTTP 504"):
        await store.put(fact)
    assert len(fake.requests_for("add")) == 1
    with pytest.raises(StoreError, match=DOUBT):
        await store.held_ids(fact)  # the cleanup stays owed until the episode turns up
    fake.finish_adds()
    (episode,) = episodes_of(fake, fact.fact_id)
    assert await store.held_ids(fact) == [episode]
    await store.remove(episode, fact)
    assert await store.verify_removed(episode, fact) is True
    assert episodes_of(fake, fact.fact_id) == []


class DropAdds(httpx.BaseTransport):
    """Sends every request on, except episode adds: those reach Zep (which may store them)
    and the connection drops before the answer."""

    def __init__(self, real: httpx.BaseTransport) -> None:
        self.real, self.adds = real, 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path.endswith("/episodes"):
            self.adds += 1
            raise httpx.RemoteProtocolError("Server disconnected", request=request)
        return self.real.handle_request(request)


async def test_a_dropped_connection_is_not_sent_again(make_store: MakeStore) -> None:
    store, fact = make_store(), make_fact()  # the default max_retries (2)
    http = store.graph._http  # the httpx client the SDK sends with
    http._transport = transport = DropAdds(http._transport)
    with pytest.raises(StoreError, match="RemoteProtocolError"):
        await store.put(fact)
    assert transport.adds == 1  # the SDK retries a dropped connection: three adds
    with pytest.raises(StoreError, match=DOUBT):
        await store.held_ids(fact)


async def test_an_add_refused_429_is_sent_again_by_the_store(
    fake: FakeZep, make_store: MakeStore
) -> None:
    store, fact = quick(make_store(max_retries=2)), make_fact()
    fake.throttle_adds = 2
    episode = await store.put(fact)
    assert len(fake.requests_for("add")) == 3
    assert episodes_of(fake, fact.fact_id) == [episode]
    assert await store.held_ids(fact) == [episode]  # nothing open: the refusals stored nothing


async def test_max_retries_bounds_the_store_s_own_retries(
    fake: FakeZep, make_store: MakeStore
) -> None:
    store, fact = quick(make_store(max_retries=1)), make_fact()
    fake.throttle_adds = 2
    with pytest.raises(StoreError, match="HTTP 429 rate_limited"):
        await store.put(fact)
    assert len(fake.requests_for("add")) == 2
    assert await store.held_ids(fact) == []  # a 429 stored nothing: no doubt to wait out


async def test_a_refused_add_is_not_sent_again(fake: FakeZep, make_store: MakeStore) -> None:
    store, fact = quick(make_store()), make_fact()
    fake.max_episode_chars = 10  # Zep answers 400: the same add would get the same answer
    with pytest.raises(StoreError, match="HTTP 400"):
        await store.put(fact)
    assert len(fake.requests_for("add")) == 1


async def test_reads_keep_the_sdk_retries(fake: FakeZep, make_store: MakeStore) -> None:
    store, fact = make_store(max_retries=1), make_fact()
    episode = await store.put(fact)
    fake.fail_next = 1  # a 500 on the episode get: a read is safe to repeat
    assert await store.verify_removed(episode, fact) is False
    assert len(fake.requests_for("get")) == 2


@pytest.mark.parametrize(
    ("failure", "again"),
    [
        (ZepRequestError("HTTP 429", status=429), True),
        (ZepRequestError("HTTP 408", status=408), True),
        (ZepRequestError("HTTP 409", status=409), True),
        (httpx.ConnectError("refused"), True),
        (ZepRequestError("HTTP 504", status=504), False),
        (ZepRequestError("HTTP 500", status=500), False),
        (ZepRequestError("HTTP 400", status=400), False),
        (ZepRequestError("HTTP 401", status=401), False),
        (httpx.ReadTimeout("read"), False),
        (httpx.RemoteProtocolError("disconnected"), False),
    ],
)
def test_which_failed_adds_are_sent_again(failure: Exception, again: bool) -> None:
    wrapped = StoreError("zep", "episode add failed")
    wrapped.__cause__ = failure  # as call_sdk raises it
    assert retry_add(failure) is again
    assert retry_add(wrapped) is again


class TestLateRulesWithDefaultRetries(LateRules):
    """The shared late-write rules (ST-4.2-late*) on a store with the default settings, the
    SDK's ``max_retries`` included (``test_conformance.py`` runs them with none)."""

    capabilities = frozenset({"held", "late"})

    @pytest.fixture
    def late_write(self, fake: FakeZep, make_store: MakeStore) -> Iterator[LateWrite]:
        yield LateWrite.on_fake(fake, quick(make_store()), doubt=DOUBT)

    @pytest.fixture
    def backdoor(self, fake: FakeZep) -> FakeBackdoor:
        return FakeBackdoor(fake)  # it asserts that a fact is held by one episode at most

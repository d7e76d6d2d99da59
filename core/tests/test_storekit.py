"""The shared store-adapter helpers: worker-thread calls, named secrets, bounded polling."""

from __future__ import annotations

import threading

import pytest

from agent_custody_state.stores import StoreError
from agent_custody_state.stores.kit import call_sdk, poll, run_sync, secret_from_env


@pytest.mark.anyio
async def test_run_sync_runs_in_a_worker_thread() -> None:
    def where(prefix: str, *, suffix: str) -> str:
        return f"{prefix}{threading.current_thread() is threading.main_thread()}{suffix}"

    assert await run_sync(where, "<", suffix=">") == "<False>"


@pytest.mark.anyio
async def test_run_sync_propagates_exceptions() -> None:
    def boom() -> None:
        raise ValueError("nope")

    with pytest.raises(ValueError, match="nope"):
        await run_sync(boom)


@pytest.mark.anyio
async def test_call_sdk_names_the_store_and_the_operation() -> None:
    def boom() -> None:
        raise ConnectionError("refused")

    def silent() -> None:
        raise RuntimeError

    def own() -> None:
        raise StoreError("vault", "already specific")

    assert await call_sdk("vault", "add", lambda x: x + 1, 1) == 2
    with pytest.raises(StoreError) as raised:
        await call_sdk("vault", "add", boom)
    assert raised.value.store == "vault"
    assert raised.value.message == "add failed: ConnectionError: refused"
    assert isinstance(raised.value.__cause__, ConnectionError)
    with pytest.raises(StoreError, match=r"delete failed: RuntimeError$"):
        await call_sdk("vault", "delete", silent)
    with pytest.raises(StoreError, match=r"^vault: already specific$"):
        await call_sdk("vault", "get", own)


def test_secret_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACS_TEST_SECRET", "s3cret")
    assert secret_from_env("vault", "ACS_TEST_SECRET") == "s3cret"
    assert secret_from_env("vault", None) is None
    monkeypatch.setenv("ACS_TEST_SECRET", " ")
    with pytest.raises(StoreError, match="ACS_TEST_SECRET is not set") as raised:
        secret_from_env("vault", "ACS_TEST_SECRET", what="token")
    assert raised.value.store == "vault" and "token" in raised.value.message
    monkeypatch.delenv("ACS_TEST_SECRET")
    with pytest.raises(StoreError, match="ACS_TEST_SECRET"):
        secret_from_env("vault", "ACS_TEST_SECRET")


@pytest.mark.anyio
async def test_poll_is_bounded() -> None:
    calls: list[int] = []

    async def settles_on_third() -> bool:
        calls.append(1)
        return len(calls) == 3

    assert await poll(settles_on_third, attempts=5, delay=0.001)
    assert len(calls) == 3

    async def never() -> bool:
        calls.append(1)
        return False

    calls.clear()
    assert not await poll(never, attempts=4, delay=0.001)
    assert len(calls) == 4


@pytest.mark.anyio
async def test_poll_can_be_bounded_by_time() -> None:
    import anyio

    calls: list[float] = []

    async def never() -> bool:
        calls.append(anyio.current_time())
        return False

    started = anyio.current_time()
    assert not await poll(never, attempts=None, delay=0.01, max_delay=0.02, timeout=0.1)
    elapsed = anyio.current_time() - started
    assert 0.1 <= elapsed < 0.5
    assert calls[-1] - started >= 0.099  # the last check comes at the deadline, not before it
    with pytest.raises(ValueError):
        await poll(never, attempts=None)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"

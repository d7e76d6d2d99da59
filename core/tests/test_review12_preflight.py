"""A store that can tell it cannot hold a fact refuses it before any store is written.

``Store.refusal`` (optional) is asked for every store before the first put: a reason fails the
write naming the store, with no put, no compensation and nothing owed anywhere (before, the
stores earlier in the configuration were written and then removed again, and a store whose
lookup refuses the same fact left a cleanup owed that could never finish).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state import AssertRequest, Ledger, serve_memory_http
from agent_custody_state.ledger.model import Fact
from agent_custody_state.stores import StoreError, StoreSet, StoreWriteError, VerifyPolicy
from agent_custody_state.stores.base import can_refuse, refusal_of
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore
from agent_custody_state.stores.outbox import Outbox
from agent_custody_state_conformance.gateway import GatewayClient

LIMIT = "values longer than 8 characters do not fit"


class Recording(InProcessStore):
    """The reference store, recording each call it gets."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.calls: list[str] = []

    async def put(self, fact: Fact) -> str:
        self.calls.append("put")
        return await super().put(fact)

    async def remove(self, external_id: str, fact: Fact) -> None:
        self.calls.append("remove")
        await super().remove(external_id, fact)


class Capped(Recording):
    """Holds values of at most 8 characters; its put refuses longer ones with the same check,
    and its lookup by fact id refuses them too (as LangGraph's namespace check does)."""

    def refusal(self, fact: Fact) -> str | None:
        return LIMIT if len(str(fact.value)) > 8 else None

    def _check(self, fact: Fact) -> None:
        reason = self.refusal(fact)
        if reason is not None:
            raise StoreError(self.name, reason)

    async def put(self, fact: Fact) -> str:
        self._check(fact)
        return await super().put(fact)

    async def held_ids(self, fact: Fact) -> list[str]:
        self._check(fact)
        return await super().held_ids(fact)


def request(value: str) -> AssertRequest:
    return AssertRequest(subject="acct:42", predicate="note", value=value, space="org", actor="a")


def stores(*members: Any) -> StoreSet:
    return StoreSet(list(members), VerifyPolicy(attempts=1, delay=0))


def test_the_first_store_sees_no_put_when_the_second_refuses_beforehand(tmp_path: Path) -> None:
    async def scenario() -> None:
        first, second = Recording("vectors"), Capped("capped")
        outbox = Outbox(tmp_path / "outbox.jsonl")
        with Ledger("memory:") as ledger:
            custody = Custody(ledger, stores(first, second), outbox=outbox)
            with pytest.raises(StoreWriteError) as caught:
                await custody.write(request("far too long"))
            assert first.calls == [] and second.calls == []
            assert (caught.value.store, caught.value.message) == ("capped", LIMIT)
            assert caught.value.compensation == {} and caught.value.owed == []
            assert str(caught.value) == f"store capped refused the write: {LIMIT}"
            assert ledger.count() == 0 and outbox.pending() == []
            # A fact it can hold goes through every store as before.
            report = await custody.write(request("short"))
            assert set(report.event.fact.external or {}) == {"vectors", "capped"}
            assert first.calls == ["put"] and second.calls == ["put"]

    anyio.run(scenario)


class AsyncCheck(Recording):
    async def refusal(self, fact: Fact) -> str | None:
        return "async: no" if fact.value == "no" else None


class Broken(Recording):
    def refusal(self, fact: Fact) -> Any:
        if fact.value == "raise":
            raise KeyError("limits")
        return True if fact.value == "true" else None


@pytest.mark.parametrize(
    ("store", "value", "reason"),
    [
        (AsyncCheck("s"), "no", "async: no"),
        (Broken("s"), "raise", "its check before the put failed: 'limits'"),
        (Broken("s"), "true", "refusal answered True, not a reason or None"),
    ],
)
def test_an_async_faulty_or_odd_check_refuses_before_any_put(
    store: Recording, value: str, reason: str
) -> None:
    """``refusal`` may be ``async``; one that raises or answers a non-text is a refusal naming
    what it did, never a put made on a guess."""

    async def scenario() -> None:
        first = Recording("first")
        with Ledger("memory:") as ledger:
            with pytest.raises(StoreWriteError) as caught:
                await Custody(ledger, stores(first, store)).write(request(value))
            assert (caught.value.store, caught.value.message) == ("s", reason)
            assert first.calls == [] and store.calls == [] and ledger.count() == 0
            await Custody(ledger, stores(first, store)).write(request("fine"))
            assert first.calls == ["put"] and store.calls == ["put"]

    anyio.run(scenario)


def test_a_store_without_the_check_is_not_asked() -> None:
    async def scenario() -> None:
        plain = Recording("plain")
        assert not can_refuse(plain) and can_refuse(Capped("c"))
        with Ledger("memory:") as ledger:
            assert await refusal_of(plain, ledger.validate_assert(request("x" * 50)).fact) is None

    anyio.run(scenario)


TOKEN = "preflight-test-token"


def test_the_tool_answer_names_the_store_and_the_ledger_is_unchanged(tmp_path: Path) -> None:
    """Through the MCP server: the same error answer a put refusal gives (``isError``, ``store
    X refused the write: <reason>``), without a compensation to report; the ledger file is
    byte for byte what it was."""

    async def scenario() -> None:
        first, second = Recording("vectors"), Capped("capped")
        path = tmp_path / "ledger.jsonl"
        ledger = Ledger(path)
        server = serve_memory_http(
            ledger,
            port=0,
            tokens={TOKEN: "gateway"},
            stores=[first, second],
            verify={"attempts": 1, "delay_ms": 1},
        )
        try:
            async with GatewayClient.http(server.url, token=TOKEN) as gw:
                write = {"subject": "acct:42", "predicate": "note", "space": "org"}
                assert not (await gw.call("memory.write", {**write, "value": "short"})).is_error
                before = path.read_bytes()
                first.calls.clear()
                result = await gw.call("memory.write", {**write, "value": "far too long"})
                assert result.is_error
                assert result.text == f"store capped refused the write: {LIMIT}"
                assert path.read_bytes() == before and ledger.count() == 1
                assert first.calls == []
        finally:
            server.close()
            ledger.close()

    anyio.run(scenario)


def test_a_put_back_a_store_cannot_hold_is_not_put(caplog: pytest.LogCaptureFixture) -> None:
    """A retraction makes an older fact current again; a store whose ``refusal`` names it is
    not asked to put it (whose failure would send a lookup that refuses it too: "may hold a
    copy"), and the put-back names the reason."""

    class Lowered(Capped):
        limit = 100

        def refusal(self, fact: Fact) -> str | None:
            return LIMIT if len(str(fact.value)) > self.limit else None

    async def scenario() -> None:
        store = Lowered("capped")
        with Ledger("memory:") as ledger:
            custody = Custody(ledger, stores(store))
            a = await custody.write(request("a long first value"))
            b = await custody.write(
                AssertRequest(
                    subject="acct:42",
                    predicate="note",
                    value="short",
                    space="org",
                    actor="a",
                    supersedes=a.event.fact_id,
                )
            )
            store.limit = 8  # the cap lowered after the first fact was written
            store.calls.clear()
            out = await custody.retract(fact_id=b.event.fact_id, actor="a", reason="wrong")
            assert out.restored is not None and out.restored.external == {}
            assert out.restored.failed == {"capped": LIMIT}
            assert store.calls == ["remove"]  # b's copy left; a was not put

    anyio.run(scenario)
    assert "cannot hold it" in caplog.text

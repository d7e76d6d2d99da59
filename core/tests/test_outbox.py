"""The outbox (``stores.outbox``): store removals owed across a crash.

A process that dies between the ledger's commit and the stores' removal is modelled by a store
whose ``remove`` raises a ``BaseException`` (nothing in the flow catches it, as nothing runs
after ``kill -9``); the vendor's rows, like a real vendor's, outlive the flow. A new ``Custody``
over the reopened ledger then resumes, as the server and ``sweep`` do at start.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state import AssertRequest, Ledger
from agent_custody_state.ledger.model import Fact
from agent_custody_state.stores import StoreSet, VerifyPolicy
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore
from agent_custody_state.stores.outbox import Outbox, outbox_path

VALUE = 'Zürich "Kundennummer" 4711-secret'


class Crash(BaseException):
    """The process dies here."""


class Store(InProcessStore):
    """The reference store; ``crash`` kills the flow at the removal, ``removes`` counts."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.crash = False
        self.removes = 0

    async def remove(self, external_id: str, fact: Fact) -> None:
        if self.crash:
            raise Crash
        self.removes += 1
        await super().remove(external_id, fact)


def held(store: InProcessStore) -> set[str]:
    return {r["metadata"]["factId"] for r in store.vendor.rows.values()}


def value_forms(value: str) -> list[bytes]:
    """The value's bytes as UTF-8, and JSON-escaped (ASCII and UTF-8, once and twice)."""
    once = [json.dumps(value), json.dumps(value, ensure_ascii=False)]
    twice = [json.dumps(text)[1:-1] for text in once]
    return [value.encode(), *(text.encode() for text in once + twice)]


def request(subject: str = "acct:42", value: Any = VALUE) -> AssertRequest:
    return AssertRequest(subject=subject, predicate="id", value=value, space="org", actor="a")


def run(tmp_path: Path, stores: list[Store], step: Any) -> Any:
    """``step(custody, ledger)`` on the JSONL ledger with ``stores`` and the ledger's outbox."""
    location = tmp_path / "ledger.jsonl"

    async def scenario() -> Any:
        with Ledger(location) as ledger:
            box = outbox_path(str(location), None)
            assert box is not None
            custody = Custody(ledger, StoreSet(stores, VerifyPolicy(1, 0)), outbox=box)
            return await step(custody, ledger)

    return anyio.run(scenario)


def pending(tmp_path: Path) -> list[Any]:
    return Outbox(tmp_path / "ledger.jsonl.outbox").pending()


def resume(tmp_path: Path, stores: list[Store]) -> Any:
    """A new start over the same ledger and outbox."""

    async def step(custody: Custody, ledger: Ledger) -> Any:
        return await custody.resume()

    return run(tmp_path, stores, step)


def write_then(tmp_path: Path, stores: list[Store], leave: str, values: int = 1) -> list[str]:
    """Write ``values`` facts, then ``leave`` the first (``forget``/``retract``) or ``sweep``
    them all, the stores crashing at the removal. Returns the fact ids."""

    async def step(custody: Custody, ledger: Ledger) -> list[str]:
        ids = [(await custody.write(request(f"acct:{i}"))).event.fact_id for i in range(values)]
        for store in stores:
            store.crash = True
        with pytest.raises(Crash):
            if leave == "sweep":
                await custody.sweep(before="2999-01-01T00:00:00Z", actor="cron", reason="retention")
            else:
                await getattr(custody, leave)(fact_id=ids[0], actor="dpo", reason="gdpr")
        for store in stores:
            store.crash = False
        return ids

    ids: list[str] = run(tmp_path, stores, step)
    return ids


@pytest.mark.parametrize("leave", ["forget", "retract"])
def test_a_crash_after_the_ledger_commit_is_finished_at_the_next_start(
    tmp_path: Path, leave: str
) -> None:
    vectors = Store("vectors")
    (fact_id,) = write_then(tmp_path, [vectors], leave)
    assert held(vectors) == {fact_id}  # the crash left the copy
    assert [(o.fact_id, o.store, o.operation) for o in pending(tmp_path)] == [
        (fact_id, "vectors", leave)
    ]
    done = resume(tmp_path, [vectors])
    assert held(vectors) == set()
    # The reference store's check needs no value: verified even after a forget.
    assert done.finished[fact_id].verification == {"vectors": "verified"}
    assert not done.dropped and not done.left
    assert pending(tmp_path) == [] and not (tmp_path / "ledger.jsonl.outbox").exists()


def test_a_crash_in_a_sweep_is_finished_at_the_next_start(tmp_path: Path) -> None:
    vectors = Store("vectors")
    ids = write_then(tmp_path, [vectors], "sweep", values=3)
    assert held(vectors) == set(ids)
    assert sorted(o.fact_id for o in pending(tmp_path)) == sorted(ids)
    done = resume(tmp_path, [vectors])
    assert held(vectors) == set() and set(done.finished) == set(ids)
    assert pending(tmp_path) == []


def test_a_crash_before_the_ledger_commit_is_dropped_and_the_store_untouched(
    tmp_path: Path,
) -> None:
    vectors = Store("vectors")

    async def step(custody: Custody, ledger: Ledger) -> str:
        fact_id = (await custody.write(request())).event.fact_id

        def die(**_: Any) -> None:
            raise Crash

        ledger.forget = die  # type: ignore[method-assign,assignment]
        with pytest.raises(Crash):
            await custody.forget(fact_id=fact_id, actor="dpo", reason="gdpr")
        return fact_id

    fact_id = run(tmp_path, [vectors], step)
    assert len(pending(tmp_path)) == 1
    done = resume(tmp_path, [vectors])
    assert [o.fact_id for o in done.dropped] == [fact_id] and not done.finished
    assert held(vectors) == {fact_id} and vectors.removes == 0
    assert pending(tmp_path) == []


def test_the_outbox_never_holds_the_value_and_is_owner_only(tmp_path: Path) -> None:
    vectors, graph = Store("vectors"), Store("graph")
    write_then(tmp_path, [vectors, graph], "forget")
    write_then(tmp_path, [vectors, graph], "sweep", values=2)
    box = tmp_path / "ledger.jsonl.outbox"
    data = box.read_bytes()
    assert data.count(b'"owe"') == 6  # two stores: one fact forgotten, then three swept
    for form in value_forms(VALUE):
        assert form not in data, form
    assert stat.S_IMODE(box.stat().st_mode) == 0o600


def test_an_entry_for_a_store_no_longer_configured_stays_and_is_reported(
    tmp_path: Path,
) -> None:
    vectors, graph = Store("vectors"), Store("graph")
    (fact_id,) = write_then(tmp_path, [vectors, graph], "forget")
    done = resume(tmp_path, [vectors])  # graph dropped from the configuration
    assert held(vectors) == set() and held(graph) == {fact_id}
    (why,) = done.left.values()
    assert "store graph is not configured here" in why
    assert [o.store for o in pending(tmp_path)] == ["graph"]
    done = resume(tmp_path, [vectors, graph])  # configured again: finished
    assert held(graph) == set() and pending(tmp_path) == []


def test_a_forget_resumed_through_a_store_whose_check_needs_the_value_is_unverified(
    tmp_path: Path,
) -> None:
    class TextStore(Store):
        verify_without_value = False  # its check searches the text, which the ledger erased

    vectors = TextStore("vectors")
    (fact_id,) = write_then(tmp_path, [vectors], "forget")
    done = resume(tmp_path, [vectors])
    assert held(vectors) == set()
    assert done.finished[fact_id].verification == {"vectors": "unverified"}


def test_a_flow_that_completes_leaves_no_outbox_and_a_refusal_drops_its_entries(
    tmp_path: Path,
) -> None:
    vectors = Store("vectors")

    async def step(custody: Custody, ledger: Ledger) -> None:
        first = (await custody.write(request("acct:1"))).event.fact_id
        second = (await custody.write(request("acct:2"))).event.fact_id
        await custody.retract(fact_id=first, actor="ops", reason="wrong")
        ledger.hold(fact_id=second, actor="legal", reason="case")
        with pytest.raises(Exception, match="on legal hold"):
            await custody.forget(fact_id=second, actor="dpo", reason="gdpr")

    run(tmp_path, [vectors], step)
    assert not (tmp_path / "ledger.jsonl.outbox").exists()


def test_two_copies_owed_in_one_store_are_both_removed(tmp_path: Path) -> None:
    """A fact may owe two copies in one store (an old copy whose removal failed, and a put-back
    made since). The resume named one id per store: one copy was removed, the other left, and
    both entries settled (seventh review)."""
    vectors = Store("vectors")
    (fact_id,) = write_then(tmp_path, [vectors], "forget")

    async def second_copy(custody: Custody, ledger: Ledger) -> None:
        fact = ledger.backend.get_assert(fact_id).fact
        other = await InProcessStore.put(vectors, fact)  # a second copy of the fact
        outbox = Outbox(tmp_path / "ledger.jsonl.outbox")
        outbox.owe([fact.with_(external={"vectors": other})], "forget", "2026-12-07T00:00:00Z")

    run(tmp_path, [vectors], second_copy)
    assert len(vectors.vendor.rows) == 2 and len(pending(tmp_path)) == 2
    done = resume(tmp_path, [vectors])
    assert held(vectors) == set() and vectors.vendor.rows == {}
    assert done.finished[fact_id].verification == {"vectors": "verified"}
    assert pending(tmp_path) == []

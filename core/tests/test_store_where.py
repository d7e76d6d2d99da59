"""A store moved since a fact was written never reads "removed" (``stores.where``).

A store declares ``where`` (the container its copies go into); the core records it with each
copy (the fact's ``externalWhere``, a put-back's ``restored`` record, an outbox entry) and
refuses to remove or check a copy recorded at another place: the forget is ``partial``, the
certificate names the store and both places, and the copy at the old place is left untouched
(a remove at the new place could delete an unrelated item under the same id).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state import AssertRequest, Ledger
from agent_custody_state.keys import PublicKeyRef
from agent_custody_state.ledger.certverify import check_certificate
from agent_custody_state.ledger.model import RetractEvent
from agent_custody_state.stores import StoreSet, VerifyPolicy
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore, MemoryVendor
from agent_custody_state.stores.outbox import Outbox

KEY = Ed25519PrivateKey.generate()
A, B = "mem://vendor-a space:support", "mem://vendor-b space:support"


class PlacedStore(InProcessStore):
    """An in-process store that declares where it writes."""

    def __init__(self, name: str, vendor: MemoryVendor, where: str) -> None:
        super().__init__(name, vendor)
        self.where = where


def custody(ledger: Ledger, *stores: InProcessStore, outbox: Any = None) -> Custody:
    return Custody(
        ledger, StoreSet(list(stores), VerifyPolicy(1, 0)), certificate_key=KEY, outbox=outbox
    )


def request(value: str = "dana@example.org", supersedes: str | None = None) -> AssertRequest:
    return AssertRequest("acct:1", "email", value, "org", "a", supersedes=supersedes)


def predicate_of(certificate: dict[str, Any] | None) -> dict[str, Any]:
    return check_certificate(certificate or {}, PublicKeyRef.of(KEY.public_key()))["predicate"]


def test_a_forget_after_the_store_moved_is_partial_and_touches_neither_place() -> None:
    async def scenario() -> None:
        old, new = MemoryVendor(), MemoryVendor()
        with Ledger("memory:") as ledger:
            here = custody(ledger, PlacedStore("s", old, A))
            # Rebuilt with the same settings: removed and verified as before.
            stays = (await here.write(request("kept@example.org"))).event
            again = custody(ledger, PlacedStore("s", old, A))
            same = await again.forget(
                fact_id=stays.fact_id, actor="a", reason="r", certificate=True
            )
            assert same.removal.verification == {"s": "verified"} and old.rows == {}
            assert predicate_of(same.certificate)["outcome"] == "complete"
            written = await here.write(request())
            fact = written.event.fact
            external_id = fact.external["s"]  # type: ignore[index]
            # An unrelated item under the same id at the new place: a remove there deletes it.
            new.rows[external_id] = {"text": "other", "value": "other", "metadata": {}}
            moved = custody(ledger, PlacedStore("s", new, B))
            done = await moved.forget(fact_id=fact.fact_id, actor="a", reason="r", certificate=True)
        assert done.removal.verification == {"s": "failed"}
        assert A in done.removal.still_held["s"] and B in done.removal.still_held["s"]
        assert external_id in old.rows  # still there, and reported
        assert new.rows[external_id]["text"] == "other"
        predicate = predicate_of(done.certificate)
        assert predicate["outcome"] == "partial"
        [entry] = predicate["stores"]["stores"]
        assert entry["name"] == "s" and entry["verification"] == "failed"
        assert not entry["acknowledged"]
        assert A in entry["error"] and B in entry["error"] and "configure a store" in entry["error"]
        assert "store s: failed" in predicate["incomplete"]

    anyio.run(scenario)


def test_the_place_is_kept_on_the_fact_across_a_jsonl_reopen(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    old, new = MemoryVendor(), MemoryVendor()

    async def write() -> str:
        with Ledger(path) as ledger:
            stores = (PlacedStore("s", old, A), InProcessStore("plain"))
            return (await custody(ledger, *stores).write(request())).event.fact_id

    fact_id = anyio.run(write)
    [line] = [json.loads(raw) for raw in path.read_text().splitlines() if raw.strip()]
    # Only the declaring store is recorded; the wire keys the original reads are unchanged.
    assert line["fact"]["externalWhere"] == {"s": A}
    assert set(line["fact"]["external"]) == {"s", "plain"}

    async def forget() -> Any:
        with Ledger(path) as ledger:
            assert ledger.get(fact_id).extra["externalWhere"] == {"s": A}  # type: ignore[union-attr]
            stores = (PlacedStore("s", new, B), InProcessStore("plain"))
            return await custody(ledger, *stores).forget(fact_id=fact_id, actor="a", reason="r")

    done = anyio.run(forget)
    assert done.removal.verification == {"s": "failed", "plain": "verified"}
    assert len(old.rows) == 1

    async def plain_only() -> None:  # no store declares where: the line is as before
        with Ledger(tmp_path / "plain.jsonl") as ledger:
            await custody(ledger, InProcessStore("plain")).write(request())

    anyio.run(plain_only)
    assert "externalWhere" not in (tmp_path / "plain.jsonl").read_text()


def test_a_put_back_records_its_place_and_a_move_after_it_is_caught() -> None:
    async def scenario() -> None:
        old, new = MemoryVendor(), MemoryVendor()
        with Ledger("memory:") as ledger:
            here = custody(ledger, PlacedStore("s", old, A))
            first = (await here.write(request())).event
            second = (await here.write(request("new@example.org", first.fact_id))).event
            undone = await here.retract(fact_id=second.fact_id, actor="a", reason="r")
            event = undone.event
            assert isinstance(event, RetractEvent)
            record = event.extra["restored"]
            assert record["factId"] == first.fact_id and record["externalWhere"] == {"s": A}
            assert record["external"]["s"] in old.rows
            # At the same place, the put-back's copy is removed and verified as before.
            same = await custody(ledger, PlacedStore("s", old, A)).retract(
                fact_id=first.fact_id, actor="a", reason="r"
            )
            assert same.removal.verification == {"s": "verified"} and old.rows == {}
            first = (await here.write(request("third@example.org"))).event
            second = (await here.write(request("fourth@example.org", first.fact_id))).event
            undone = await here.retract(fact_id=second.fact_id, actor="a", reason="r")
            record = undone.event.extra["restored"]
            moved = custody(ledger, PlacedStore("s", new, B))
            done = await moved.forget(fact_id=first.fact_id, actor="a", reason="r")
            assert done.removal.verification == {"s": "failed"}
            assert record["external"]["s"] in old.rows

    anyio.run(scenario)


def test_a_moved_store_keeps_its_removal_owed_for_a_store_configured_at_the_old_place(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.jsonl"
    box = tmp_path / "ledger.jsonl.outbox"
    old, new = MemoryVendor(), MemoryVendor()

    async def scenario() -> None:
        with Ledger(path) as ledger:
            fact_id = (await custody(ledger, PlacedStore("s", old, A)).write(request())).event
            moved = custody(ledger, PlacedStore("s", new, B), outbox=box)
            done = await moved.forget(fact_id=fact_id.fact_id, actor="a", reason="r")
            assert done.removal.verification == {"s": "failed"}
            [owed] = Outbox(box).pending()
            assert owed.store == "s" and owed.where == A
            # Resumed at the new place: refused again, still owed.
            resumed = await moved.resume()
            assert resumed is not None and owed.entry in resumed.left
            assert A in resumed.left[owed.entry] and len(old.rows) == 1
            # A store configured for the old place finishes it.
            back = custody(ledger, PlacedStore("s", old, A), outbox=box)
            finished = await back.resume()
            assert finished is not None
            assert finished.finished[fact_id.fact_id].removed_from == ["s"]
            assert old.rows == {} and Outbox(box).pending() == []

    anyio.run(scenario)


def test_a_sweep_after_the_store_moved_is_partial() -> None:
    async def scenario() -> None:
        old, new = MemoryVendor(), MemoryVendor()
        with Ledger("memory:") as ledger:
            await custody(ledger, PlacedStore("s", old, A)).write(request())
            moved = custody(ledger, PlacedStore("s", new, B))
            report = await moved.sweep(
                before="2999-01-01T00:00:00Z", actor="a", reason="r", certificates=True
            )
        [swept] = report.forgotten
        assert swept.removal.verification == {"s": "failed"} and len(old.rows) == 1
        assert predicate_of(swept.certificate)["outcome"] == "partial"

    anyio.run(scenario)


def test_an_outbox_line_written_before_where_still_loads(tmp_path: Path) -> None:
    box = tmp_path / "o.outbox"
    old = {"owe": "e1", "factId": "f1", "store": "s", "externalId": "x1"}
    old |= {"operation": "forget", "at": "2026-01-01T00:00:00.000Z", "pid": 1}
    box.write_text(json.dumps(old) + "\n")
    [owed] = Outbox(box).pending()
    assert (owed.entry, owed.external_id, owed.space, owed.where) == ("e1", "x1", None, None)
    assert "where" not in owed.line()

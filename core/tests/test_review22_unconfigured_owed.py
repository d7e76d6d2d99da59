"""An owed removal from a store not configured here stays owed (twenty-second review).

A fact written through stores ``a`` and ``gone`` and then retracted, forgotten or swept by a
process that has only ``a`` configured: the report names ``gone`` in ``stillHeld`` ("not
configured here"), but the flow settled every outbox entry of the fact, ``gone``'s included,
so a later process with ``gone`` configured found nothing owed and the value stayed in
``gone`` for good. ``Owing._settle`` now settles only the entries of the stores the removal
asked (a failed removal's included, as before) and leaves the others owed for ``resume``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore
from agent_custody_state.stores.outbox import Outbox

FAR = "2999-01-01T00:00:00Z"

Flow = Callable[[Custody, str], Awaitable[Any]]

FLOWS: dict[str, Flow] = {
    "retract": lambda custody, fact_id: custody.retract(fact_id=fact_id, actor="x", reason="r"),
    "forget": lambda custody, fact_id: custody.forget(fact_id=fact_id, actor="x", reason="r"),
    "sweep": lambda custody, _: custody.sweep(before=FAR, actor="x", reason="r"),
}


def _written(ledger: Ledger, a: InProcessStore, gone: InProcessStore) -> tuple[str, str, str]:
    """A fact written through ``a`` and ``gone``: its id and its two copies' ids."""
    request = AssertRequest(subject="s", predicate="p", value="v", space="o", actor="x")
    fact_id = anyio.run(Custody(ledger, [a, gone]).write, request).event.fact_id
    fact = ledger.get(fact_id)
    assert fact is not None and fact.external is not None
    return fact_id, fact.external["a"], fact.external["gone"]


@pytest.mark.parametrize("flow", sorted(FLOWS))
def test_a_store_not_configured_keeps_its_removal_owed_for_a_process_that_has_it(
    tmp_path: Path, flow: str
) -> None:
    a, gone = InProcessStore("a"), InProcessStore("gone")
    outbox = tmp_path / "outbox"
    with Ledger(tmp_path / "l.jsonl") as ledger:
        fact_id, in_a, in_gone = _written(ledger, a, gone)
        anyio.run(FLOWS[flow], Custody(ledger, [a], outbox=outbox), fact_id)  # "gone" left out
        assert in_a not in a.vendor.rows and in_gone in gone.vendor.rows
        [owed] = Outbox(outbox).pending()
        assert (owed.fact_id, owed.store, owed.external_id) == (fact_id, "gone", in_gone)
        # A start with this configuration leaves it, logged...
        resumed = anyio.run(Custody(ledger, [a], outbox=Outbox(outbox)).resume)
        assert resumed is not None and list(resumed.left.values()) == [
            f"store gone is not configured here; its copy (id {in_gone}) is owed"
        ]
        # ...and a process with "gone" configured removes the copy and empties the outbox.
        resumed = anyio.run(Custody(ledger, [a, gone], outbox=Outbox(outbox)).resume)
        assert resumed is not None and resumed.finished[fact_id].verification == {
            "gone": "verified"
        }
        assert in_gone not in gone.vendor.rows
        assert Outbox(outbox).pending() == []
        assert not outbox.exists()


@pytest.mark.parametrize("flow", sorted(FLOWS))
def test_a_configured_store_whose_removal_failed_is_still_settled(
    tmp_path: Path, flow: str
) -> None:
    """Unchanged: a failed removal is reported (``stillHeld``) and its entry settled; only the
    unconfigured store's entry stays."""
    a, gone = InProcessStore("a"), InProcessStore("gone")
    outbox = tmp_path / "outbox"
    with Ledger(tmp_path / "l.jsonl") as ledger:
        fact_id, in_a, in_gone = _written(ledger, a, gone)
        a.vendor.fail = True
        anyio.run(FLOWS[flow], Custody(ledger, [a], outbox=outbox), fact_id)
        assert in_a in a.vendor.rows
        assert [(o.store, o.external_id) for o in Outbox(outbox).pending()] == [("gone", in_gone)]


def test_without_the_unconfigured_store_the_outbox_is_emptied(tmp_path: Path) -> None:
    """Every store asked: nothing stays owed and the file is removed, as before."""
    a, gone = InProcessStore("a"), InProcessStore("gone")
    outbox = tmp_path / "outbox"
    with Ledger(tmp_path / "l.jsonl") as ledger:
        fact_id, in_a, in_gone = _written(ledger, a, gone)
        anyio.run(FLOWS["forget"], Custody(ledger, [a, gone], outbox=outbox), fact_id)
        assert in_a not in a.vendor.rows and in_gone not in gone.vendor.rows
        assert not outbox.exists()

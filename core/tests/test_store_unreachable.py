"""Removals that cannot reach a store must say so: never a false "complete" (SPEC 4.3).

A fact the ledger records in a store (``external``) that the running server or command line
does not have configured (removed from the config, a CLI run without ``--config``) was neither
removed nor checked there. Retract, forget and sweep must name that store as still holding the
fact, and a write whose ledger append fails for any reason must take the fact back out of the
stores it was already put into.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import anyio
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state import AssertRequest, Ledger
from agent_custody_state.keys import PublicKeyRef
from agent_custody_state.ledger.certverify import check_certificate
from agent_custody_state.stores import StoreSet, StoreWriteError, VerifyPolicy
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore

OLD = datetime(2026, 1, 1, tzinfo=UTC)
#: The write most tests make.
PRO = AssertRequest(subject="acct:42", predicate="plan", value="pro", space="org", actor="agent")


def _held_by_ghost(ledger: Ledger) -> str:
    """A fact the ledger records in store ``ghost``, which no test configures."""
    event = ledger.assert_fact(
        subject="acct:42", predicate="plan", value="pro", space="org", actor="agent",
        external={"ghost": "g-1"},
    )  # fmt: skip
    return event.fact_id


@pytest.mark.parametrize("configured", [[], ["vectors"]])
def test_forget_names_a_store_that_is_not_configured(configured: list[str]) -> None:
    async def scenario() -> None:
        with Ledger("memory:") as ledger:
            fact_id = _held_by_ghost(ledger)
            stores = StoreSet([InProcessStore(n) for n in configured], VerifyPolicy(1, 0))
            done = await Custody(ledger, stores).forget(fact_id=fact_id, actor="dpo", reason="r")
            assert "ghost" in done.removal.still_held
            assert "g-1" in done.removal.still_held["ghost"]
            assert done.removal.removed_from == []
            assert ledger.get(fact_id).value is None  # type: ignore[union-attr]

    anyio.run(scenario)


def test_retract_names_a_store_that_is_not_configured() -> None:
    async def scenario() -> None:
        with Ledger("memory:") as ledger:
            fact_id = _held_by_ghost(ledger)
            done = await Custody(ledger, [InProcessStore("vectors")]).retract(
                fact_id=fact_id, actor="auditor", reason="wrong"
            )
            assert list(done.removal.still_held) == ["ghost"]

    anyio.run(scenario)


def test_sweep_without_stores_names_the_store_still_holding() -> None:
    async def scenario() -> None:
        with Ledger("memory:", clock=lambda: OLD) as ledger:
            fact_id = _held_by_ghost(ledger)
            plain = ledger.assert_fact(
                subject="acct:43", predicate="plan", value="x", space="org", actor="agent"
            )
            report = await Custody(ledger).sweep(
                actor="dpo", reason="r", before="2026-06-01T00:00:00.000Z"
            )
            assert {s.event.fact_id for s in report.forgotten} == {fact_id, plain.fact_id}
            assert report.still_held == [fact_id]
            assert report.problems()[0].startswith(f"ghost ({fact_id}): store ghost")

    anyio.run(scenario)


def test_the_mirror_leaves_unconfigured_stores_out_of_a_supersession() -> None:
    """A supersession only touches the mirroring stores; it reports nothing for others."""

    async def scenario() -> None:
        with Ledger("memory:") as ledger:
            old = _held_by_ghost(ledger)
            custody = Custody(ledger, [InProcessStore("vectors")])
            report = await custody.write(
                AssertRequest(
                    subject="acct:42", predicate="plan", value="team", space="org",
                    actor="agent", supersedes=old,
                )
            )  # fmt: skip
            assert report.mirror is not None and report.mirror.still_held == {}

    anyio.run(scenario)


class _BrokenAppend(Exception):
    """What a ledger backend raises when it cannot append (disk full, connection lost)."""


def test_a_failed_append_of_any_kind_compensates_the_stores() -> None:
    async def scenario() -> None:
        store = InProcessStore("vectors")
        with Ledger("memory:") as ledger:

            async def append(request: Any) -> Any:
                raise _BrokenAppend("disk full")

            custody = Custody(ledger, [store], append=append)
            with pytest.raises(_BrokenAppend):
                await custody.write(PRO)
            assert ledger.facts() == []
            assert store.vendor.rows == {}, "the store kept a fact the ledger never recorded"

    anyio.run(scenario)


def test_an_append_that_failed_after_landing_keeps_the_stores() -> None:
    """An error raised after the ledger recorded the fact must not strip it from the stores:
    the ledger would then record a copy that no longer exists."""

    async def scenario() -> None:
        store = InProcessStore("vectors")
        with Ledger("memory:") as ledger:

            async def append(request: Any) -> Any:
                ledger.assert_fact(request)
                raise _BrokenAppend("lost the reply after the commit")

            custody = Custody(ledger, [store], append=append)
            with pytest.raises(_BrokenAppend):
                await custody.write(PRO)
            (fact,) = ledger.facts()
            assert fact.external is not None
            assert list(store.vendor.rows) == [fact.external["vectors"]]

    anyio.run(scenario)


def test_certificates_without_stores_are_partial_when_the_ledger_names_one() -> None:
    """A forget or sweep run without the store configured (a command line without --config)
    must not certify a complete erasure of a fact the ledger records in that store."""
    key = Ed25519PrivateKey.generate()

    async def scenario() -> None:
        with Ledger("memory:", clock=lambda: OLD) as ledger:
            custody = Custody(ledger, certificate_key=key)
            first, second = _held_by_ghost(ledger), _held_by_ghost(ledger)
            done = await custody.forget(fact_id=first, actor="dpo", reason="r", certificate=True)
            swept = await custody.sweep(
                actor="dpo", reason="r", before="2026-06-01T00:00:00.000Z", certificates=True
            )
            certificates = [done.certificate, *(s.certificate for s in swept.forgotten)]
            assert [s.event.fact_id for s in swept.forgotten] == [second]
            for envelope in certificates:
                predicate = check_certificate(envelope or {}, PublicKeyRef.of(key.public_key()))[
                    "predicate"
                ]
                assert predicate["outcome"] == "partial"
                (entry,) = predicate["stores"]["stores"]
                assert entry["name"] == "ghost" and entry["verification"] == "notConfigured"

    anyio.run(scenario)


class _AcknowledgesOnly(InProcessStore):
    """Answers a delete with success and keeps the record (a vendor's queue that drops it)."""

    async def remove(self, external_id: str, fact: Any) -> None:
        return None


def test_a_compensation_that_removed_nothing_is_not_reported_removed() -> None:
    async def scenario() -> None:
        sticky = _AcknowledgesOnly("sticky")
        refusing = InProcessStore("refusing")
        refusing.vendor.fail = True
        stores = StoreSet([sticky, refusing], VerifyPolicy(attempts=2, delay=0))
        with Ledger("memory:") as ledger:
            with pytest.raises(StoreWriteError) as caught:
                await Custody(ledger, stores).write(PRO)
        assert sticky.vendor.rows, "the sticky store still holds the write"
        assert caught.value.compensation["sticky"] != "removed"
        assert "still found" in str(caught.value)

    anyio.run(scenario)

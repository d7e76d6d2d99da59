"""A store's residual windows reach the erasure certificate (``stores.residual``).

A verified removal reaches what a store serves, not its backups, old row versions or what it
derived from the text. Each store that held the fact adds the places it declares (``residual``)
to the certificate's ``residualWindows``, naming itself; a store that declares nothing, or
something of another shape, is listed as such; the outcome does not change.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state import AssertRequest, Ledger
from agent_custody_state.keys import PublicKeyRef
from agent_custody_state.ledger.certverify import check_certificate
from agent_custody_state.ledger.residual import residual_windows
from agent_custody_state.stores import StoreSet, VerifyPolicy
from agent_custody_state.stores.base import register_secret
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore, MemoryVendor
from agent_custody_state.stores.residual import UNDECLARED, process_memory, residual_of

KEY = Ed25519PrivateKey.generate()
WAL = {"where": "the vendor's WAL", "until": "it is recycled"}


class Declaring(InProcessStore):
    """An in-process store that declares its residual windows (any object, as a plugin might)."""

    def __init__(self, name: str, residual: Any) -> None:
        super().__init__(name, MemoryVendor())
        self.residual = residual


class Silent(InProcessStore):
    """A store that declares nothing (``residual`` hidden from the reference store)."""

    residual = None


class Raising(InProcessStore):
    @property
    def residual(self) -> list[dict[str, str]]:
        raise RuntimeError("settings gone")


def custody(ledger: Ledger, *stores: InProcessStore) -> Custody:
    return Custody(ledger, StoreSet(list(stores), VerifyPolicy(1, 0)), certificate_key=KEY)


def request(subject: str = "acct:1") -> AssertRequest:
    return AssertRequest(subject, "email", "dana@example.org", "org", "a")


def predicate_of(certificate: dict[str, Any] | None) -> dict[str, Any]:
    return check_certificate(certificate or {}, PublicKeyRef.of(KEY.public_key()))["predicate"]


def by_store(predicate: dict[str, Any]) -> dict[str, list[dict[str, str]]]:
    found: dict[str, list[dict[str, str]]] = {}
    for w in predicate["residualWindows"]:
        if "store" in w:
            found.setdefault(w["store"], []).append({"where": w["where"], "until": w["until"]})
    return found


def test_each_store_that_held_the_fact_adds_its_windows_after_the_ledgers(
    tmp_path: Path,
) -> None:
    async def scenario() -> dict[str, Any]:
        with Ledger(tmp_path / "l.jsonl") as ledger:
            stores = (Declaring("a", [WAL]), Silent("b", MemoryVendor()))
            here = custody(ledger, *stores)
            fact = (await here.write(request())).event.fact
            done = await here.forget(fact_id=fact.fact_id, actor="a", reason="r", certificate=True)
        assert done.removal.verification == {"a": "verified", "b": "verified"}
        return predicate_of(done.certificate)

    predicate = anyio.run(scenario)
    assert predicate["outcome"] == "complete"  # what remains elsewhere is told, not failed
    ledger_part = residual_windows("jsonl", "plain")
    assert predicate["residualWindows"][: len(ledger_part)] == ledger_part
    assert by_store(predicate) == {"a": [WAL], "b": list(UNDECLARED)}


def test_crypto_shred_lists_the_stores_windows_which_were_sent_the_plaintext(
    tmp_path: Path,
) -> None:
    async def scenario() -> dict[str, Any]:
        location = tmp_path / "l.jsonl"
        with Ledger(location, forget_mode="crypto-shred") as ledger:
            here = custody(ledger, Declaring("a", (WAL,)))
            fact = (await here.write(request())).event.fact
            done = await here.forget(fact_id=fact.fact_id, actor="a", reason="r", certificate=True)
        return predicate_of(done.certificate)

    predicate = anyio.run(scenario)
    assert predicate["sanitization"]["category"] == "Purge"
    assert predicate["residualWindows"] == [{"store": "a", **WAL}]


def test_a_sweep_certificate_carries_the_windows_too(tmp_path: Path) -> None:
    async def scenario() -> dict[str, Any]:
        with Ledger(tmp_path / "l.jsonl") as ledger:
            here = custody(ledger, Declaring("a", [WAL]))
            await here.write(request())
            time.sleep(0.002)
            report = await here.sweep(actor="a", reason="r", before=ledger.now(), certificates=True)
        [swept] = report.forgotten
        return predicate_of(swept.certificate)

    assert by_store(anyio.run(scenario)) == {"a": [WAL]}


@pytest.mark.parametrize(
    "declared",
    [
        "the vendor's WAL",
        WAL,
        [WAL, "more"],
        [{"where": "x"}],
        [{**WAL, "extra": "y"}],
        [{"where": "", "until": "u"}],
        [{"where": 1, "until": "u"}],
        [],
        42,
    ],
)
def test_a_declaration_of_another_shape_reads_as_undeclared(declared: Any) -> None:
    assert residual_of(Declaring("a", declared)) == list(UNDECLARED)


def test_a_property_that_raises_or_no_store_reads_as_undeclared() -> None:
    assert residual_of(Raising("a", MemoryVendor())) == list(UNDECLARED)
    assert residual_of(InProcessStore("a", MemoryVendor())) == [process_memory()]
    assert residual_of(None) == list(UNDECLARED)
    assert residual_of(Declaring("a", iter([WAL]))) == [WAL]


def test_a_registered_secret_or_url_password_never_reaches_the_certificate() -> None:
    register_secret("s3cr3t-residual-token")
    leaky = {
        "where": "backups at https://svc:hunter2@backup.example/s3cr3t-residual-token",
        "until": "s3cr3t-residual-token expires",
    }
    [shown] = residual_of(Declaring("a", [leaky]))
    assert "hunter2" not in str(shown) and "s3cr3t-residual-token" not in str(shown)
    assert shown["where"].startswith("backups at https://svc:***@backup.example/")

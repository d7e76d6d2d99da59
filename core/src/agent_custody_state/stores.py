"""Write-through stores: the ``Store`` protocol and the orchestration the core runs around it.

A store is a retrieval system a team already runs (mem0, Zep, pgvector, ...). The core, not a
pluggy fan-out, drives them, because custody needs a fixed order and a defined outcome on
failure (SPEC 4.2, 4.3, 6):

- write: the ledger validates, every store is ``put`` in configuration order, then the ledger
  appends with the external ids. A store that fails makes the call fail; the stores already
  written are compensated (removed) and the outcome of each compensation is reported.
- retract / forget / sweep: the ledger first, then ``remove`` on each store holding the fact,
  then ``verify_removed`` with retries and exponential delay: ``verified``, ``stillIndexed``,
  ``unverified`` (the store cannot be asked) or ``failed`` (the removal raised).
- mirroring (SPEC 6 improvement): stores hold what is believed now. A store mirrors unless it
  is configured append-only (``mirror = false`` in its ``[[stores]]`` table, a ``mirror = False``
  attribute, or ``StoreSet(append_only=...)``). The flows that use this live in ``mirror.py``.

Store methods are ``async`` so network stores never block the server's event loop; an adapter over
a blocking SDK runs its calls in a worker thread (``anyio.to_thread.run_sync``).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import anyio

from .canonical import js_json
from .ledger.model import Fact

log = logging.getLogger(__name__)

Verification = Literal["verified", "stillIndexed", "unverified", "failed"]


class StoreError(Exception):
    """A store refused or failed an operation; ``store`` names it."""

    def __init__(self, store: str, message: str) -> None:
        super().__init__(f"{store}: {message}")
        self.store = store
        self.message = message


@runtime_checkable
class Store(Protocol):
    """What a write-through store implements. ``verify_removed`` is optional."""

    name: str

    async def put(self, fact: Fact) -> str:
        """Write the fact (text + custody metadata); return the store's own id for it."""

    async def remove(self, external_id: str, fact: Fact) -> None:
        """Remove what ``put`` wrote; removing something already gone is not an error."""


def can_verify(store: Store) -> bool:
    return callable(getattr(store, "verify_removed", None))


def fact_text(fact: Fact) -> str:
    """The text every store receives: ``"<subject> <predicate>: <value>"`` (SPEC 6)."""
    value = fact.value if isinstance(fact.value, str) else js_json(fact.value)
    return f"{fact.subject} {fact.predicate}: {value}"


def custody_metadata(fact: Fact) -> dict[str, Any]:
    """The custody metadata every store keeps beside the text (SPEC 6)."""
    return {
        "factId": fact.fact_id,
        "space": fact.space,
        "actor": fact.actor,
        "provenance": fact.provenance,
        "receiptId": fact.source.receipt_id,
        "validFrom": fact.valid_from,
        "source": "agent-custody",
    }


@dataclass(frozen=True)
class VerifyPolicy:
    """How often, and how patiently, removal is verified (SPEC 4.3)."""

    attempts: int = 3
    delay: float = 0.2  # seconds before the first retry; doubles each time


@dataclass
class StoreWriteError(Exception):
    """A write-through failed; nothing was appended. ``compensation`` says what was undone."""

    store: str
    message: str
    compensation: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        text = f"store {self.store} refused the write: {self.message}"
        if self.compensation:
            undone = ", ".join(f"{k}: {v}" for k, v in self.compensation.items())
            text += f"; compensated: {undone}"
        return text


@dataclass
class RemovalReport:
    """Outcome of removing one fact from every store that holds it."""

    removed_from: list[str] = field(default_factory=list)
    still_held: dict[str, str] = field(default_factory=dict)  # store -> error message
    verification: dict[str, Verification] = field(default_factory=dict)


def mirrors(store: Store) -> bool:
    """Whether a store mirrors the present (the default) rather than only accumulating."""
    return getattr(store, "mirror", True) is not False


class StoreSet:
    """The configured stores, in order, with the write/remove/verify orchestration.

    ``append_only`` names stores that keep the plain append-only behaviour: they are written on
    every write and cleaned on retract/forget/sweep, but a supersession does not remove the old
    value from them and a retraction does not put one back.
    """

    def __init__(
        self,
        stores: Sequence[Store] = (),
        verify: VerifyPolicy | None = None,
        *,
        append_only: Collection[str] = (),
    ) -> None:
        names = [s.name for s in stores]
        duplicates = {n for n in names if names.count(n) > 1}
        if duplicates:
            raise ValueError(f"store names must be unique; repeated: {', '.join(sorted(duplicates))}")
        unknown = set(append_only) - set(names)
        if unknown:
            raise ValueError(f"append_only names unknown stores: {', '.join(sorted(unknown))}")
        self.stores = list(stores)
        self.verify = verify or VerifyPolicy()
        self.append_only = frozenset(append_only)

    def __bool__(self) -> bool:
        return bool(self.stores)

    def __iter__(self) -> Iterator[Store]:
        return iter(self.stores)

    def __len__(self) -> int:
        return len(self.stores)

    def by_name(self, name: str) -> Store | None:
        return next((s for s in self.stores if s.name == name), None)

    def mirroring(self) -> list[Store]:
        """The stores that mirror the present, in configuration order."""
        return [s for s in self.stores if s.name not in self.append_only and mirrors(s)]

    async def put_all(self, fact: Fact) -> dict[str, str]:
        """Put into every store in order; on a failure compensate and raise ``StoreWriteError``."""
        written: dict[str, str] = {}
        for store in self.stores:
            try:
                external_id = await store.put(fact)
                if not isinstance(external_id, str) or not external_id:
                    raise StoreError(store.name, f"put returned {external_id!r}, not an id")
            except Exception as exc:
                compensation = await self.compensate(fact, written)
                raise StoreWriteError(store.name, _message(exc), compensation) from exc
            written[store.name] = external_id
        return written

    async def compensate(self, fact: Fact, written: dict[str, str]) -> dict[str, str]:
        """Undo puts (newest first); returns store -> ``removed`` or ``removal failed: ...``."""
        outcome: dict[str, str] = {}
        for name, external_id in reversed(list(written.items())):
            store = self.by_name(name)
            assert store is not None
            try:
                await store.remove(external_id, fact)
                outcome[name] = "removed"
            except Exception as exc:
                log.error("compensation of %s in %s failed: %s", fact.fact_id, name, exc)
                outcome[name] = f"removal failed: {_message(exc)}"
        return outcome

    async def remove_all(self, fact: Fact, only: Collection[str] | None = None) -> RemovalReport:
        """Remove the fact from each store holding it (by ``fact.external``) and verify.

        ``only`` limits the removal to the stores named (the mirror uses it for supersessions).
        """
        report = RemovalReport()
        for store in self.stores:
            if only is not None and store.name not in only:
                continue
            external_id = (fact.external or {}).get(store.name)
            if external_id is None:
                continue
            try:
                await store.remove(external_id, fact)
            except Exception as exc:
                report.still_held[store.name] = _message(exc)
                report.verification[store.name] = "failed"
                continue
            report.removed_from.append(store.name)
            report.verification[store.name] = await self._verify(store, external_id, fact)
        return report

    async def _verify(self, store: Store, external_id: str, fact: Fact) -> Verification:
        if not can_verify(store):
            return "unverified"
        attempts = max(1, self.verify.attempts)
        for attempt in range(attempts):
            if attempt:
                await anyio.sleep(self.verify.delay * 2 ** (attempt - 1))
            try:
                if await store.verify_removed(external_id, fact):  # type: ignore[attr-defined]
                    return "verified"
            except Exception as exc:
                log.warning("verifying removal from %s failed: %s", store.name, exc)
        return "stillIndexed"


def _message(exc: BaseException) -> str:
    if isinstance(exc, StoreError):
        return exc.message
    text = str(exc) or type(exc).__name__
    return text

"""The configured stores, in order: put with compensation, remove with verification (SPEC 4.3).

- before any put: every store that can tell (``refusal``, optional) is asked whether it can
  hold the fact; the first reason, in configuration order, fails the put naming that store,
  with nothing written anywhere (no compensation, nothing owed).
- put: every store in configuration order; a store that fails makes the whole put fail, and the
  stores already written are compensated (removed, and checked like any removal), each
  compensation's outcome reported. The failing store may have kept the fact all the same (a
  timeout after the vendor stored it): it is asked for its copies by fact id and each is
  removed (``orphans``); the outcome names it too (``no copy left``, ``removed a copy the
  failed put left``, ``may hold a copy (...)``), and ``StoreWriteError.owed`` lists the stores
  whose cleanup is left to retry.
- remove: each store holding the fact (by its external id), then ``verify_removed`` with
  retries and exponential delay: ``verified``, ``stillIndexed``, ``unverified`` (the store cannot
  be asked) or ``failed`` (the removal raised, or the copy was written where the store no
  longer writes: ``where``).
- mirroring (SPEC 6 improvement): stores hold what is believed now. A store mirrors unless it is
  configured append-only (``mirror = false`` in its ``[[stores]]`` table, a ``mirror = False``
  attribute, or ``StoreSet(append_only=...)``); ``flows`` uses this.

Every failure is logged here (logger ``agent_custody_state.stores.storeset``) as well as
reported to the caller: a refused put or a refusal before it (WARNING), each compensation
(WARNING; ERROR when the removal failed too), a failed removal (ERROR) and a removal not
verified (WARNING). The lines name the store and the fact id, never the value.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import anyio

from agent_custody_state.ledger.model import Fact
from agent_custody_state.stores.base import (
    Store,
    StoreError,
    Verification,
    can_verify,
    error_message,
    mirrors,
    refusal_of,
)
from agent_custody_state.stores.orphans import clear_failed_put
from agent_custody_state.stores.where import moved

log = logging.getLogger(__name__)


def describe_compensation(outcome: Mapping[str, str]) -> str:
    """``a: removed, b: removal failed: ...``: how compensations are reported everywhere."""
    return ", ".join(f"{name}: {what}" for name, what in outcome.items())


@dataclass(frozen=True)
class VerifyPolicy:
    """How often, and how patiently, removal is verified (SPEC 4.3)."""

    attempts: int = 3
    delay: float = 0.2  # seconds before the first retry; doubles each time


@dataclass
class StoreWriteError(Exception):
    """A write-through failed; nothing was appended. ``compensation`` says what was undone,
    the failing store included (what its failed put may have left); ``owed``: stores whose
    cleanup of that copy is unfinished and can be retried (``Custody`` records it in the
    outbox)."""

    store: str
    message: str
    compensation: dict[str, str] = field(default_factory=dict)
    owed: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        text = f"store {self.store} refused the write: {self.message}"
        if self.compensation:
            text += f"; compensated: {describe_compensation(self.compensation)}"
        return text


@dataclass
class RemovalReport:
    """Outcome of removing one fact from every store that holds it."""

    removed_from: list[str] = field(default_factory=list)
    still_held: dict[str, str] = field(default_factory=dict)  # store -> error message
    verification: dict[str, Verification] = field(default_factory=dict)
    #: stores not asked: the copy was written where the store no longer writes (``where``)
    moved: list[str] = field(default_factory=list)


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
            raise ValueError(
                f"store names must be unique; repeated: {', '.join(sorted(duplicates))}"
            )
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
        """Put into every store in order; on a failure compensate and raise ``StoreWriteError``.
        A store refusing the fact beforehand (``refuse_early``) fails it with nothing written."""
        await self.refuse_early(fact)
        written: dict[str, str] = {}
        for store in self.stores:
            try:
                external_id = await store.put(fact)
                if not isinstance(external_id, str) or not external_id:
                    raise StoreError(store.name, f"put returned {external_id!r}, not an id")
            except Exception as exc:
                log.warning(
                    "store %s refused the write of fact %s: %s",
                    store.name,
                    fact.fact_id,
                    error_message(exc, fact),
                    extra={"store": store.name, "fact": fact.fact_id},
                )
                compensation = await self.compensate(fact, written)
                # The put raised, but the vendor may have kept the fact: find and remove it.
                leftover = await clear_failed_put(store, fact, self.check_removed)
                compensation[store.name] = leftover.outcome
                owed = [store.name] if leftover.owed else []
                raise StoreWriteError(
                    store.name, error_message(exc, fact), compensation, owed
                ) from exc
            written[store.name] = external_id
        return written

    async def refuse_early(self, fact: Fact) -> None:
        """Ask every store that can tell (``Store.refusal``) whether it can hold ``fact``; the
        first that cannot, in configuration order, fails the put with ``StoreWriteError``
        naming it, before any store is written (no compensation, nothing owed)."""
        for store in self.stores:
            reason = await refusal_of(store, fact)
            if reason is None:
                continue
            log.warning(
                "store %s refused the write of fact %s before any store was written: %s",
                store.name,
                fact.fact_id,
                reason,
                extra={"store": store.name, "fact": fact.fact_id},
            )
            raise StoreWriteError(store.name, reason)

    async def compensate(self, fact: Fact, written: dict[str, str]) -> dict[str, str]:
        """Undo puts (newest first); returns store -> ``removed``, ``removal failed: ...`` or,
        when the store's own check still finds the fact, ``removed, but still found ...``."""
        outcome: dict[str, str] = {}
        for name, external_id in reversed(list(written.items())):
            store = self.by_name(name)
            assert store is not None
            try:
                await store.remove(external_id, fact)
                # An acknowledged delete is not a removal: check it like any other (SPEC 4.3).
                if await self._verify(store, external_id, fact) == "stillIndexed":
                    outcome[name] = "removed, but still found by its check (stillIndexed)"
                    log.error(
                        "compensation not verified: fact %s is still found in %s",
                        fact.fact_id,
                        name,
                        extra={"store": name, "fact": fact.fact_id},
                    )
                    continue
                outcome[name] = "removed"
                log.warning(
                    "compensated: fact %s removed again from %s",
                    fact.fact_id,
                    name,
                    extra={"store": name, "fact": fact.fact_id},
                )
            except Exception as exc:
                log.error(
                    "compensation failed: fact %s is still in %s: %s",
                    fact.fact_id,
                    name,
                    error_message(exc, fact),
                    extra={"store": name, "fact": fact.fact_id},
                )
                outcome[name] = f"removal failed: {error_message(exc, fact)}"
        return outcome

    async def remove_all(
        self,
        fact: Fact,
        only: Collection[str] | None = None,
        blind: Collection[str] = (),
        into: RemovalReport | None = None,
    ) -> RemovalReport:
        """Remove the fact from each store holding it (by ``fact.external``) and verify.

        ``only`` limits the removal to the stores named (the mirror uses it for supersessions).
        Without ``only``, a store the fact is recorded in but that is not configured here is
        reported in ``still_held`` (with no verification): nothing removed it, so the erasure
        must not look complete. ``blind``: stores whose check is not asked (``unverified``);
        the outbox names those whose check needs a value the ledger no longer has. ``into``:
        the report to fill, store by store (a sweep cut mid-way reads what was answered).
        """
        report = into if into is not None else RemovalReport()
        for store in self.stores:
            if only is not None and store.name not in only:
                continue
            external_id = (fact.external or {}).get(store.name)
            if external_id is None:
                continue
            elsewhere = moved(store, fact)
            if elsewhere is not None:  # removing or checking here would miss the copy
                log.error("fact %s: %s", fact.fact_id, elsewhere, extra={"store": store.name})
                report.still_held[store.name] = elsewhere
                report.verification[store.name] = "failed"
                report.moved.append(store.name)
                continue
            try:
                await store.remove(external_id, fact)
            except Exception as exc:
                log.error(
                    "removing fact %s from %s failed: %s",
                    fact.fact_id,
                    store.name,
                    error_message(exc, fact),
                    extra={"store": store.name, "fact": fact.fact_id},
                )
                report.still_held[store.name] = error_message(exc, fact)
                report.verification[store.name] = "failed"
                continue
            report.removed_from.append(store.name)
            verification: Verification = (
                "unverified"
                if store.name in blind
                else await self._verify(store, external_id, fact)
            )
            report.verification[store.name] = verification
            if verification == "stillIndexed":
                log.warning(
                    "fact %s removed from %s but still found by its search after %d checks",
                    fact.fact_id,
                    store.name,
                    self.verify.attempts,
                    extra={"store": store.name, "fact": fact.fact_id},
                )
        if only is None:
            self.report_unconfigured(fact, report)
        return report

    def report_unconfigured(self, fact: Fact, report: RemovalReport) -> None:
        """Name in ``report.still_held`` each store ``fact`` is recorded in that is not
        configured here (logged): nothing removed or checked its copy."""
        for name, external_id in (fact.external or {}).items():
            if self.by_name(name) is not None:
                continue
            log.error(
                "fact %s is recorded in store %s, which is not configured here; not removed",
                fact.fact_id,
                name,
                extra={"store": name, "fact": fact.fact_id},
            )
            report.still_held[name] = (
                f"store {name} is not configured here, so its copy (id {external_id}) was "
                "neither removed nor checked"
            )

    async def check_removed(self, store: Store, external_id: str, fact: Fact) -> Verification:
        """Verify one removal with this set's policy (``unverified`` without a check)."""
        return await self._verify(store, external_id, fact)

    async def _verify(self, store: Store, external_id: str, fact: Fact) -> Verification:
        if not can_verify(store):
            return "unverified"
        attempts = max(1, self.verify.attempts)
        answered = False  # every attempt failed: the store could not be asked (SPEC 4.3)
        for attempt in range(attempts):
            if attempt:
                await anyio.sleep(self.verify.delay * 2 ** (attempt - 1))
            try:
                answer = await store.verify_removed(external_id, fact)  # type: ignore[attr-defined]
                if answer is True:
                    return "verified"
                if answer is not False:  # "yes", a list, None: not an answer to trust as gone
                    raise StoreError(store.name, f"verify_removed answered {answer!r}, not a bool")
                answered = True
            except Exception as exc:
                log.warning(
                    "verifying the removal of fact %s from %s failed: %s",
                    fact.fact_id,
                    store.name,
                    error_message(exc, fact),
                    extra={"store": store.name, "fact": fact.fact_id},
                )
        return "stillIndexed" if answered else "unverified"

"""The copy a failed put may have left: found by the fact id and removed, or reported as owed.

A ``put`` that raises has not always failed: the vendor may have stored the fact and the answer
been lost (a timeout after the write, a connection cut before the reply). Compensation removes
only the copies whose ids came back, and the ledger appends nothing, so such a copy would be
recorded nowhere: no retract, forget or sweep could ever reach it. So after a put raises
(``StoreSet.put_all``, and the put-back in ``mirror``), the failing store is asked for its
copies of the fact (``held_ids``, optional, see ``base.Store``), each is removed and checked like
a compensation, and the outcome names the store:

- ``no copy left``: the lookup found none;
- ``removed a copy the failed put left`` (or ``removed N copies ...``), with
  ``, but still found by its check (stillIndexed)`` when its check still finds one;
- ``may hold a copy (looking it up failed: ...)`` / ``(removing it failed: ...)``: the cleanup
  can be retried (``owed``; logged as a WARNING): ``Custody.write`` records it in the outbox,
  and ``resume`` retries it (``orphan_resume``); without an outbox ``Custody.write`` logs an
  ERROR naming the store and the fact id;
- ``may hold a copy (cannot look up by fact id)``: the store has no ``held_ids``. Nothing could
  retry it, so it is not recorded in the outbox; an ERROR log line names the store and fact id,
  and the operator deletes the copy whose custody metadata has that ``factId`` by hand.

Nothing here raises: the put's own error is what the caller must see.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass

from agent_custody_state.ledger.model import Fact
from agent_custody_state.stores.base import Store, Verification, can_find_held, error_message

log = logging.getLogger(__name__)

Check = Callable[[Store, str, Fact], Awaitable[Verification]]

#: The outcome for a store without ``held_ids``.
NO_LOOKUP = "may hold a copy (cannot look up by fact id)"
NONE_LEFT = "no copy left"

_RANK: dict[str, int] = {"verified": 0, "unverified": 1, "failed": 2, "stillIndexed": 3}


@dataclass(frozen=True)
class Leftover:
    """What cleaning up after one failed put found and did."""

    outcome: str  # reported as the store's compensation
    owed: bool = False  # not finished, and ``held_ids`` could finish it later (the outbox)
    removed: tuple[str, ...] = ()  # the ids removed
    verification: Verification | None = None  # the worst check of those removals


async def clear_failed_put(
    store: Store, fact: Fact, check: Check | None, *, keep: Collection[str] = ()
) -> Leftover:
    """Find and remove the copies of ``fact`` a failed put left in ``store`` (see the module
    docstring). ``check`` verifies each removal (None: ``unverified``); ``keep``: ids the
    ledger records for the fact in this store, which are not the failed put's."""
    try:
        return await _clear(store, fact, check, keep)
    except Exception as exc:  # a bug or a surprise: never over the put's own error
        log.error(
            "cleaning up after the failed put of fact %s into %s failed: %s",
            fact.fact_id,
            store.name,
            error_message(exc, fact),
            extra={"store": store.name, "fact": fact.fact_id},
        )
        return Leftover(f"may hold a copy (cleanup failed: {error_message(exc, fact)})", owed=True)


def _unknown(store: Store, fact: Fact, why: str, *, owed: bool) -> None:
    # A cleanup that can be retried is the caller's to record (the outbox) or to escalate:
    # a warning here. One nothing can retry needs the operator: an error.
    log.log(
        logging.WARNING if owed else logging.ERROR,
        "store %s may hold a copy of fact %s that no ledger event records (%s); delete its "
        "copies whose custody metadata has factId %s",
        store.name,
        fact.fact_id,
        why,
        fact.fact_id,
        extra={"store": store.name, "fact": fact.fact_id},
    )


async def _clear(store: Store, fact: Fact, check: Check | None, keep: Collection[str]) -> Leftover:
    if not can_find_held(store):
        _unknown(store, fact, "it cannot look up copies by fact id", owed=False)
        return Leftover(NO_LOOKUP)
    try:
        held = await store.held_ids(fact)  # type: ignore[attr-defined]
    except Exception as exc:
        _unknown(store, fact, f"looking it up failed: {error_message(exc, fact)}", owed=True)
        return Leftover(
            f"may hold a copy (looking it up failed: {error_message(exc, fact)})", owed=True
        )
    ids = [i for i in dict.fromkeys(held) if isinstance(i, str) and i and i not in keep]
    if not ids:
        return Leftover(NONE_LEFT)
    failures: list[str] = []
    removed: list[str] = []
    worst: Verification = "verified"
    for external_id in ids:
        try:
            await store.remove(external_id, fact)
        except Exception as exc:
            failures.append(f"{external_id}: {error_message(exc, fact)}")
            continue
        removed.append(external_id)
    if failures:
        why = f"removing it failed: {'; '.join(failures)}"
        _unknown(store, fact, why, owed=True)
        return Leftover(f"may hold a copy ({why})", owed=True, removed=tuple(removed))
    # Checked once all are removed: a check by fact id sees every part until the last is gone.
    for external_id in removed:
        verification = await check(store, external_id, fact) if check else "unverified"
        worst = max(worst, verification, key=_RANK.__getitem__)
    what = (
        "removed a copy the failed put left"
        if len(ids) == 1
        else f"removed {len(ids)} copies the failed put left"
    )
    if worst == "stillIndexed":
        log.error(
            "fact %s: the copy its failed put left in %s is still found after removal",
            fact.fact_id,
            store.name,
            extra={"store": store.name, "fact": fact.fact_id},
        )
        what += ", but still found by its check (stillIndexed)"
        return Leftover(what, removed=tuple(ids), verification=worst)
    log.warning(
        "fact %s: removed %d copies its failed put left in %s",
        fact.fact_id,
        len(ids),
        store.name,
        extra={"store": store.name, "fact": fact.fact_id},
    )
    return Leftover(what, removed=tuple(ids), verification=worst)

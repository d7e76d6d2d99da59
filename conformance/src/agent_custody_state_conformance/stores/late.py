"""Store rules for a write the vendor finishes after the store stopped waiting (SPEC 4.2).

A put that got no answer (a gateway's 5xx, a timeout, a dropped connection) may still be running
at the vendor: it stores the copy later, and until then no lookup shows it. ``held_ids`` must not
answer "none" meanwhile (the cleanup would be settled with a copy still to come): it raises, so
``StoreSet.put_all`` reports "may hold a copy" and the outbox keeps the cleanup owed, until a
copy turns up or the store's ``settle_seconds`` have passed. A write the vendor refused (a 4xx)
stored nothing and leaves no doubt. The store keeps this record in an
``agent_custody_state.plugin.Unanswered``.

These rules run for stores that declare the ``"late"`` capability, through the ``late_write``
fixture: a :class:`LateWrite` that makes the vendor store the next write later (``hold``) and
catch up (``finish``); :meth:`LateWrite.on_fake` builds one for a loopback fake.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

import pytest

from agent_custody_state.plugin import Unanswered
from agent_custody_state.stores import Store, StoreError, StoreSet, StoreWriteError
from agent_custody_state.stores.base import can_find_held, settle_seconds_of

from ..fakeserver import FakeVendorServer, Reply, Request
from ..rules import rule
from .base import StoreRules, make_fact

__all__ = ["LateRules", "LateWrite", "SettleClock", "refusing"]


class SettleClock:
    """A monotonic clock that moves only when told (``advance``), for ``Unanswered``."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@runtime_checkable
class _FinishesLater(Protocol):
    """A fake whose ``store_later = N`` answers the next N writes 5xx before storing them,
    and whose ``finish_adds()`` stores them (the vendor caught up)."""

    store_later: int

    def finish_adds(self) -> None: ...


@runtime_checkable
class _KeepsUnanswered(Protocol):
    unanswered: Unanswered


@contextmanager
def refusing(fake: FakeVendorServer, op: str = "add", status: int = 400) -> Iterator[None]:
    """While inside: the fake answers its ``op`` route with ``status`` (its own error shape)
    and stores nothing, as a vendor refusing a write does; every other route works."""

    def refuse(request: Request, params: dict[str, str]) -> Reply:
        return fake.error(status, f"refused by the test ({op})")

    routes = fake._routes
    if not any(route.op == op for route in routes):
        raise ValueError(f"the fake has no route {op!r}; name the op its write goes to")
    fake._routes = [replace(r, handler=refuse) if r.op == op else r for r in routes]
    try:
        yield
    finally:
        fake._routes = routes


@dataclass
class LateWrite:
    """What a plugin's ``late_write`` fixture returns (capability ``"late"``).

    - ``store``: the store the rules write through (one that does not retry the vendor's 5xx
      itself, or the retry stores a second copy at once).
    - ``hold()``: the vendor answers the next write without an answer the store can use (a
      5xx, a timeout) before storing it, and stores it only at ``finish()``.
    - ``finish()``: the vendor catches up and stores what it held.
    - ``refusing()`` (optional): a context manager within which the vendor refuses writes with
      a 4xx and stores nothing; without it ``ST-4.2-late-refused`` is skipped.
    - ``advance(seconds)`` (optional): moves the clock the store's ``Unanswered`` measures
      ``settle_seconds`` by; without it ``ST-4.2-late-settles`` is skipped.
    - ``doubt`` (optional): a regex the error of ``held_ids`` must match while in doubt (the
      plugin's own wording).
    """

    store: Store
    hold: Callable[[], object]
    finish: Callable[[], object]
    refusing: Callable[[], AbstractContextManager[object]] | None = None
    advance: Callable[[float], object] | None = None
    doubt: str | None = None

    @classmethod
    def on_fake(
        cls, fake: FakeVendorServer, store: Store, *, op: str = "add", doubt: str | None = None
    ) -> LateWrite:
        """For a loopback fake with ``store_later`` and ``finish_adds()``, whose write goes
        to route ``op``, and a store keeping its record in ``store.unanswered`` (replaced by
        one on a :class:`SettleClock`, with the same ``settle_seconds``)."""
        if not isinstance(fake, _FinishesLater):
            raise TypeError(f"{type(fake).__name__} has no store_later and finish_adds()")
        if not isinstance(store, _KeepsUnanswered):
            raise TypeError(f"{type(store).__name__} keeps no Unanswered in .unanswered")
        clock = SettleClock()
        store.unanswered = Unanswered(store.unanswered.settle_seconds, clock=clock)

        def hold() -> None:
            fake.store_later += 1

        return cls(
            store,
            hold=hold,
            finish=fake.finish_adds,
            refusing=lambda: refusing(fake, op),
            advance=clock.advance,
            doubt=doubt,
        )


class LateRules(StoreRules):
    """The rules for a write the vendor finishes late (``late_write``)."""

    __suite_root__ = True

    def late(self, request: pytest.FixtureRequest) -> LateWrite:
        self.require("late")
        late: LateWrite = request.getfixturevalue("late_write")
        assert can_find_held(late.store), 'capability "late" needs held_ids on the store'
        return late

    async def _in_doubt(self, late: LateWrite, fact: Any) -> StoreError:
        store = late.store
        with pytest.raises(StoreError) as caught:
            held = await store.held_ids(fact)  # type: ignore[attr-defined]
            pytest.fail(
                f"held_ids answered {held!r} while a write the vendor may still finish is "
                "open: an empty list settles the cleanup with a copy still to come"
            )
        assert caught.value.store == store.name
        if late.doubt is not None:
            assert re.search(late.doubt, caught.value.message), caught.value.message
        return caught.value

    @rule("ST-4.2-late")
    async def test_a_write_finished_late_is_never_reported_as_no_copy(
        self, request: pytest.FixtureRequest, backdoor: Any
    ) -> None:
        """A put the vendor stores only after the store stopped waiting: ``put_all`` reports
        "may hold a copy" (never "no copy left") and owes the cleanup; ``held_ids`` raises
        ``StoreError`` naming the store until the vendor finishes, then names the copy, which
        ``remove`` removes.

        Troubleshooting: wrap the vendor call in ``Unanswered.sending(fact_id)`` and, in
        ``held_ids``, raise while ``Unanswered.doubt(fact_id, held)`` gives an age (both in
        ``agent_custody_state.plugin``); tell ``may_have_landed`` where the SDK keeps the HTTP
        status (``status_of``), so a 5xx counts as unanswered.
        """
        late = self.late(request)
        store, fact = late.store, make_fact()
        late.hold()
        with pytest.raises(StoreWriteError) as caught:
            await StoreSet([store]).put_all(fact)
        outcome = caught.value.compensation.get(store.name, "")
        assert outcome.startswith("may hold a copy"), (
            f"put_all reported {outcome!r} while the vendor may still store the copy"
        )
        assert caught.value.owed == [store.name], "the cleanup is not kept owed (the outbox)"
        await self._in_doubt(late, fact)
        late.finish()
        held = await store.held_ids(fact)  # type: ignore[attr-defined]
        assert held, "held_ids finds nothing after the vendor stored the copy"
        assert await self.find(backdoor, fact.fact_id) is not None
        for external_id in held:
            await store.remove(external_id, fact)
        assert await store.held_ids(fact) == []  # type: ignore[attr-defined]
        assert await self.find(backdoor, fact.fact_id) is None, "the late copy is still held"

    @rule("ST-4.2-late-settles")
    async def test_the_doubt_ends_after_settle_seconds(
        self, request: pytest.FixtureRequest
    ) -> None:
        """The store declares ``settle_seconds`` > 0, and a write that never lands keeps
        ``held_ids`` raising for exactly that long: just before, it raises; from then on it
        answers ``[]``.

        Troubleshooting: give ``Unanswered`` the store's settle setting and return it from
        ``settle_seconds`` (``resume`` after a restart keeps the cleanup owed that long).
        """
        late = self.late(request)
        if late.advance is None:
            pytest.skip("late_write gives no advance(seconds) to move the store's clock")
        store, fact = late.store, make_fact()
        settle = settle_seconds_of(store)
        assert settle > 0, "a store whose writes may land late declares settle_seconds > 0"
        late.hold()
        with pytest.raises(StoreError):
            await store.put(fact)
        step = min(1.0, settle / 2)
        late.advance(settle - step)
        await self._in_doubt(late, fact)
        late.advance(step)
        assert await store.held_ids(fact) == [], (  # type: ignore[attr-defined]
            f"still in doubt {settle}s (settle_seconds) after the write"
        )

    @rule("ST-4.2-late-refused")
    async def test_a_refused_write_leaves_no_doubt(self, request: pytest.FixtureRequest) -> None:
        """A write the vendor refused (a 4xx: nothing stored) leaves no doubt: ``held_ids``
        answers ``[]`` at once and ``put_all`` reports "no copy left", owing nothing.

        Troubleshooting: ``may_have_landed`` counts a 4xx as answered; if the SDK wraps the
        status in its own error type, pass ``status_of`` to ``Unanswered.sending``.
        """
        late = self.late(request)
        if late.refusing is None:
            pytest.skip("late_write gives no refusing() to make the vendor answer a 4xx")
        store, fact, other = late.store, make_fact(), make_fact()
        with late.refusing():
            with pytest.raises(StoreError) as refused:
                await store.put(fact)
            with pytest.raises(StoreWriteError) as caught:
                await StoreSet([store]).put_all(other)
        assert refused.value.store == store.name
        assert await store.held_ids(fact) == []  # type: ignore[attr-defined]
        assert caught.value.compensation.get(store.name) == "no copy left"
        assert caught.value.owed == []

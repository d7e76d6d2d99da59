"""An in-process index of events, shared by the in-memory and JSONL backends.

It answers the ``EventBackend`` read questions from dicts keyed by fact id, supersedes and space, so
the reference backend and the file backend cannot disagree on a query. It holds every event in
memory: right for the reference and for audit-sized JSONL ledgers, not for millions of events
(use SQLite or PostgreSQL there).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Collection, Iterator

from agent_custody_state.ledger.backend import KEY_NAMES, KeyName
from agent_custody_state.ledger.model import (
    AssertEvent,
    Event,
    ForgetEvent,
    Forgotten,
    forget_assert,
)
from agent_custody_state.timeutil import wire_time_key


class EventIndex:
    """Events in append order plus the lookups the ledger needs."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._tx: list[str] = []
        self._by_fact: dict[str, list[int]] = defaultdict(list)
        self._by_supersedes: dict[str, list[int]] = defaultdict(list)
        self._assert_of: dict[str, int] = {}
        self._asserts: list[int] = []
        # Positions of asserts by subject and by space, so a filtered read looks at its
        # candidates only instead of scanning every assert.
        self._by_subject: dict[str, list[int]] = defaultdict(list)
        self._by_space: dict[str, list[int]] = defaultdict(list)
        self._space_counts: dict[str, int] = defaultdict(int)
        # For completions: per key, how many asserts of facts not forgotten carry each value,
        # and (built on first use, dropped when a value appears or disappears) those values
        # sorted, so a prefix is found by bisection.
        self._live: dict[KeyName, dict[str, int]] = {k: defaultdict(int) for k in KEY_NAMES}
        self._sorted: dict[KeyName, list[str]] = {}

    def __len__(self) -> int:
        return len(self.events)

    def add(self, event: Event) -> int:
        pos = len(self.events)
        self.events.append(event)
        self._tx.append(wire_time_key(event.tx_time))
        self._by_fact[event.fact_id].append(pos)
        if isinstance(event, AssertEvent):
            self._assert_of.setdefault(event.fact_id, pos)
            self._asserts.append(pos)
            self._by_subject[event.fact.subject].append(pos)
            self._by_space[event.fact.space].append(pos)
            self._space_counts[event.fact.space] += 1
            if event.supersedes:
                self._by_supersedes[event.supersedes].append(pos)
            self._count_keys(event, 1)
        elif isinstance(event, ForgetEvent):
            first = self.get_assert(event.fact_id)
            if first is not None:
                self._count_keys(first, -1)
        return pos

    def _count_keys(self, event: AssertEvent, step: int) -> None:
        fact = event.fact  # the four ``KEY_NAMES``, unrolled: every event read at open comes here
        live, sorted_ = self._live, self._sorted
        pairs: tuple[tuple[KeyName, str], ...] = (
            ("subject", str(fact.subject)),  # ``key_of``'s text, as a hand-written line may hold a
            ("predicate", str(fact.predicate)),  # number where text belongs
            ("space", str(fact.space)),
            ("factId", fact.fact_id),
        )
        for key, value in pairs:
            counts = live[key]
            before = counts[value]
            counts[value] = before + step
            if (before == 0) != (before + step == 0) and sorted_:  # a value came or went
                sorted_.pop(key, None)

    def key_values(self, key: KeyName, prefix: str = "", limit: int = 100) -> list[str]:
        """``EventBackend.key_values`` from the live counts (bisection in the sorted values)."""
        values = self._sorted.get(key)
        if values is None:
            values = self._sorted[key] = sorted(v for v, n in self._live[key].items() if n > 0)
        out: list[str] = []
        for value in values[bisect_left(values, prefix) :]:
            if len(out) >= limit or not value.startswith(prefix):
                break
            out.append(value)
        return out

    def truncate(self, length: int) -> None:
        """Drop events past ``length`` (rolling back a failed transaction)."""
        if length >= len(self.events):
            return
        kept = self.events[:length]
        self.__init__()  # type: ignore[misc]
        for event in kept:
            self.add(event)

    def positions(self, fact_id: str) -> list[int]:
        """Positions of the events whose fact id is ``fact_id``, in append order."""
        return list(self._by_fact.get(fact_id, ()))

    def position_of_assert(self, fact_id: str) -> int | None:
        return self._assert_of.get(fact_id)

    def rewrite_forgotten(self, fact_id: str, forgotten: Forgotten) -> list[int]:
        """Apply a forget's rewrite to every assert of the fact; returns the positions changed."""
        changed = []
        for pos in self._by_fact.get(fact_id, []):
            event = self.events[pos]
            if isinstance(event, AssertEvent):
                self.events[pos] = forget_assert(event, forgotten)
                changed.append(pos)
        return changed

    def get_assert(self, fact_id: str) -> AssertEvent | None:
        pos = self._assert_of.get(fact_id)
        return self.events[pos] if pos is not None else None  # type: ignore[return-value]

    def events_for(self, fact_ids: Collection[str]) -> list[Event]:
        positions = sorted({p for f in fact_ids for p in self._by_fact.get(f, ())})
        return [self.events[p] for p in positions]

    def superseders(self, fact_ids: Collection[str]) -> list[AssertEvent]:
        positions = sorted({p for f in fact_ids for p in self._by_supersedes.get(f, ())})
        return [self.events[p] for p in positions]  # type: ignore[misc]

    def history(self, fact_id: str) -> list[Event]:
        positions = sorted({*self._by_fact.get(fact_id, ()), *self._by_supersedes.get(fact_id, ())})
        return [self.events[p] for p in positions]

    def find_asserts(
        self,
        *,
        space: str | None = None,
        subject: str | None = None,
        predicate: str | None = None,
        tx_at: str | None = None,
        tx_before: str | None = None,
    ) -> Iterator[AssertEvent]:
        positions = self._asserts
        if subject is not None:
            positions = self._by_subject.get(subject, [])
        elif space is not None:
            positions = self._by_space.get(space, [])
        for pos in positions:
            event = self.events[pos]
            assert isinstance(event, AssertEvent)
            fact = event.fact
            if space is not None and fact.space != space:
                continue
            if subject is not None and fact.subject != subject:
                continue
            if predicate is not None and fact.predicate != predicate:
                continue
            tx = self._tx[pos]
            if tx_at is not None and tx > tx_at:
                continue
            if tx_before is not None and tx >= tx_before:
                continue
            yield event

    def spaces(self) -> list[str]:
        return sorted(s for s, n in self._space_counts.items() if n)

    def forget_events(self) -> Iterator[ForgetEvent]:
        for event in self.events:
            if isinstance(event, ForgetEvent):
                yield event

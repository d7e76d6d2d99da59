"""The random ledger operations of the crash worker (``crash_worker.py``), and the values they write.

Each ``op_*`` method picks its target from what the worker knows of its facts and returns the
*intent* (the fact ids it chose and, as hex, the byte strings of every value it writes) with the
call that performs it, or None when it has nothing to work on; ``OPS`` weights them for the
random mix. The worker writes the intent down before the call and the ack after it.

``make_value`` is also what the erasure tests write: a value of a random shape carrying a fresh
marker. This file is test machinery, not part of the product.
"""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

SPACES = ("org", "team:crash", "user:dana")


def make_value(rng: random.Random) -> tuple[Any, list[str]]:
    """A value of a random shape, and the byte strings (hex) a file holding it would contain.

    Every value carries a fresh random marker, so a needle found in a file can only come from
    this value (short or repeated values would match unrelated bytes).
    """
    marker = uuid.uuid4().hex
    shape = rng.randrange(5)
    if shape == 0:
        value: Any = f"str-{marker}"
        needles = [f"str-{marker}"]
    elif shape == 1:
        # 15 digits: exact in a double (the wire numbers are JS doubles), verbatim in the JSON.
        number = rng.randrange(10**14, 9 * 10**14)
        value, needles = number, [str(number)]
    elif shape == 2:
        value = {"plan": {"tier": f"t-{marker}", "seats": [1, 2, {"n": f"n-{marker}"}]}}
        needles = [f"t-{marker}", f"n-{marker}"]
    elif shape == 3:
        value = f"ünïcødé-日本-{marker}-😀"
        needles = [marker, "日本-" + marker]
    else:
        value = [f"l-{marker}", 0.5, None, True, {"k": f"k-{marker}"}]
        needles = [f"l-{marker}", f"k-{marker}"]
    return value, [n.encode("utf-8").hex() for n in needles]


class Operations:
    """The operations of one worker, as a mixin: the worker owns the ledger, the random source,
    the sets of fact ids below (loaded from the ledger, then kept up to date by each call) and
    ``_run``, which notes intent and ack around a call."""

    ledger: Any
    rng: random.Random
    live: set[str]  # not forgotten
    heads: set[str]  # neither superseded nor retracted nor forgotten
    claimed: set[str]  # not yet confirmed
    held: set[str]  # under a legal hold

    def _run(self, name: str, intent: dict[str, Any], call: Any) -> None:
        raise NotImplementedError

    def op_assert(self) -> tuple[dict[str, Any], Any]:
        value, needles = make_value(self.rng)
        fid = str(uuid.uuid4())
        intent = {"factIds": [fid], "needles": {fid: needles}, "values": {fid: value}}
        space = self.rng.choice(SPACES)

        def call() -> list[Any]:
            event = self.ledger.assert_fact(
                subject=f"c-{fid[:8]}",
                predicate="p",
                value=value,
                space=space,
                actor="crash",
                fact_id=fid,
                provenance=self.rng.choice(["claimed", "attested"]),
            )
            self.live.add(fid)
            self.heads.add(fid)
            if event.fact.provenance == "claimed":
                self.claimed.add(fid)
            return [event]

        return intent, call

    def op_supersede(self) -> tuple[dict[str, Any], Any] | None:
        if not self.heads:
            return None
        old = self.rng.choice(sorted(self.heads))
        prev = self.ledger.get(old)
        if prev is None:
            return None
        value, needles = make_value(self.rng)
        fid = str(uuid.uuid4())
        intent = {
            "factIds": [fid],
            "needles": {fid: needles},
            "values": {fid: value},
            "supersedes": old,
        }

        def call() -> list[Any]:
            event = self.ledger.assert_fact(
                subject=prev.subject,
                predicate=prev.predicate,
                value=value,
                space=prev.space,
                actor="crash",
                fact_id=fid,
                supersedes=old,
            )
            self.heads.discard(old)
            self.heads.add(fid)
            self.live.add(fid)
            self.claimed.add(fid)
            return [event]

        return intent, call

    def op_many(self) -> tuple[dict[str, Any], Any]:
        items, needles, values = [], {}, {}
        for _ in range(self.rng.randrange(2, 5)):
            value, n = make_value(self.rng)
            fid = str(uuid.uuid4())
            needles[fid], values[fid] = n, value
            items.append(
                {
                    "subject": f"b-{fid[:8]}",
                    "predicate": "p",
                    "value": value,
                    "space": "org",
                    "actor": "crash",
                    "fact_id": fid,
                }
            )
        intent = {"factIds": list(needles), "needles": needles, "values": values, "batch": True}

        def call() -> list[Any]:
            events = self.ledger.assert_many(items)
            for e in events:
                self.live.add(e.fact_id)
                self.heads.add(e.fact_id)
                self.claimed.add(e.fact_id)
            return events

        return intent, call

    def _pick(self, pool: set[str]) -> str | None:
        return self.rng.choice(sorted(pool)) if pool else None

    def op_retract(self) -> tuple[dict[str, Any], Any] | None:
        fid = self._pick(self.heads)
        if fid is None:
            return None

        def call() -> list[Any]:
            event = self.ledger.retract(fact_id=fid, actor="crash", reason="crash loop")
            self.heads.discard(fid)
            return [event]

        return {"factIds": [fid]}, call

    def op_confirm(self) -> tuple[dict[str, Any], Any] | None:
        fid = self._pick(self.claimed & self.heads)
        if fid is None:
            return None

        def call() -> list[Any]:
            event = self.ledger.confirm(fact_id=fid, actor="crash")
            self.claimed.discard(fid)
            return [event]

        return {"factIds": [fid]}, call

    def op_hold(self) -> tuple[dict[str, Any], Any] | None:
        fid = self._pick(self.live - self.held)
        if fid is None:
            return None

        def call() -> list[Any]:
            event = self.ledger.hold(fact_id=fid, actor="crash", reason="litigation")
            self.held.add(fid)
            return [event]

        return {"factIds": [fid]}, call

    def op_release(self) -> tuple[dict[str, Any], Any] | None:
        fid = self._pick(self.held)
        if fid is None:
            return None

        def call() -> list[Any]:
            event = self.ledger.release(fact_id=fid, actor="crash", reason="settled")
            self.held.discard(fid)
            return [event]

        return {"factIds": [fid]}, call

    def op_forget(self) -> tuple[dict[str, Any], Any] | None:
        fid = self._pick(self.live - self.held)
        if fid is None:
            return None

        def call() -> list[Any]:
            event = self.ledger.forget(fact_id=fid, actor="crash", reason="erasure")
            self.live.discard(fid)
            self.heads.discard(fid)
            return [event]

        return {"factIds": [fid]}, call

    def op_sweep(self) -> tuple[dict[str, Any], Any]:
        # Fill a fresh space first (acknowledged asserts), then sweep it: several forgets and
        # one compaction at the end, the path a retention job takes.
        space = f"sweep-{uuid.uuid4().hex[:8]}"
        for _ in range(self.rng.randrange(2, 4)):
            value, needles = make_value(self.rng)
            fid = str(uuid.uuid4())
            intent = {"factIds": [fid], "needles": {fid: needles}, "values": {fid: value}}
            self._run(
                "assert",
                intent,
                lambda fid=fid, value=value: [
                    self.ledger.assert_fact(
                        subject=f"s-{fid[:8]}",
                        predicate="p",
                        value=value,
                        space=space,
                        actor="crash",
                        fact_id=fid,
                    )
                ],
            )
            self.live.add(fid)
        ids = [
            f.fact_id
            for f in self.ledger.learned_before(datetime.now(UTC) + timedelta(seconds=5), space)
        ]

        def call() -> list[Any]:
            result = self.ledger.sweep(
                before=datetime.now(UTC) + timedelta(seconds=5),
                space=space,
                actor="crash",
                reason="retention",
            )
            for e in result.forgotten:
                self.live.discard(e.fact_id)
            return list(result.forgotten)

        return {"factIds": ids, "space": space}, call

    OPS: ClassVar[dict[str, tuple[Any, int]]] = {
        "assert": (op_assert, 5),
        "supersede": (op_supersede, 4),
        "many": (op_many, 2),
        "retract": (op_retract, 2),
        "confirm": (op_confirm, 1),
        "hold": (op_hold, 1),
        "release": (op_release, 1),
        "forget": (op_forget, 4),
        "sweep": (op_sweep, 2),
    }

"""A naive reference model of the ledger, written from SPEC.md sections 1-2 and 7 alone.

It keeps the events in a list and answers every read by brute force from the SPEC's definition
(2.2's numbered steps, 2.3-2.7), sharing no code with the ledger, so a bug in the ledger's own
logic shows up as a disagreement in ``test_spec_model.py``. Refusals raise ``Refused`` with the
SPEC's text and the ``LedgerError.code`` the ledger documents for it.

Interpretations where the SPEC is silent (docs/data-model.md, "Interpretations") are marked
``# interpretation``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
RANK = {"claimed": 0, "attested": 1, "verified": 2}
INCLUDE = {"all": 0, "attested": 1, "verified": 2}
MAX_INT = 2**53 - 1
Wire = dict[str, Any]
Opt = str | None
THE_FACT, KEEP = "the fact it supersedes", "the subject and predicate"


class Refused(Exception):
    """A refusal: ``str()`` is the SPEC text, ``code`` the documented ``LedgerError.code``."""

    def __init__(self, message: str, code: str, field: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.field = field


def ms(moment: datetime) -> int:
    """An aware datetime as whole milliseconds since the epoch (truncated)."""
    delta = moment.astimezone(UTC) - EPOCH
    return (delta.days * 86_400_000) + delta.seconds * 1000 + delta.microseconds // 1000


def wire(at: int) -> str:
    """Milliseconds since the epoch as the wire form of SPEC 1.3."""
    moment = EPOCH + timedelta(milliseconds=at)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at % 1000:03d}Z"


def parse_time(value: Any, param: str) -> int:
    """SPEC 1.3: RFC 3339 with an offset, or an aware datetime; anything else is refused."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise Refused(f"{param}: does not parse", "invalid_argument", param) from None
    else:
        raise Refused(f"{param}: not a time", "invalid_argument", param)
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise Refused(f"{param}: has no UTC offset", "invalid_argument", param)
    return ms(moment)


def _index_key(key: str) -> bool:
    return key.isdigit() and str(int(key)) == key and int(key) <= 2**32 - 2


def canonical(value: Any) -> str:
    """SPEC 2.5's canonical JSON (index keys first, then UTF-16 order), for the values we draw."""
    if isinstance(value, float) and value == int(value) and abs(value) < 1e21:
        return str(int(value))  # JSON.stringify(1.0) is "1"
    if value is None or isinstance(value, bool | int | float | str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ",".join(canonical(v) for v in value) + "]"
    index = sorted((k for k in value if _index_key(k)), key=int)
    other = sorted((k for k in value if not _index_key(k)), key=lambda k: k.encode("utf-16-be"))
    return "{" + ",".join(f"{canonical(k)}:{canonical(value[k])}" for k in index + other) + "}"


def check_value(value: Any, where: str = "value") -> None:
    """SPEC 2.1: I-JSON only (no NaN/Infinity, integers within +-(2^53-1)), naming the place."""
    if isinstance(value, float) and not math.isfinite(value):
        name = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        raise Refused(f"{where}: {name} is not JSON", "invalid_argument", "value")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        raise Refused(f"{where}: integer out of range", "invalid_argument", "value")
    if isinstance(value, list):
        for i, item in enumerate(value):
            check_value(item, f"{where}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            check_value(item, f"{where}.{key}")


@dataclass
class Ev:
    """One event: ``fact`` holds an assert's fact (rewritten in place by forget)."""

    kind: str
    tx: int
    fact_id: str
    fact: Wire = field(default_factory=dict)  # empty unless an assert
    supersedes: str | None = None
    body: Wire = field(default_factory=dict)  # actor, reason, source, digest ...

    def to_dict(self) -> Wire:
        head = {"kind": self.kind, "txTime": wire(self.tx)}
        if self.kind == "assert":
            fact = render(self.fact, self.fact["provenance"], None)
            return {**head, "fact": fact, "supersedes": self.supersedes}
        return {**head, "factId": self.fact_id, **self.body}


def render(fact: Wire, provenance: str, valid_to: int | None) -> Wire:
    """A fact in SPEC 1.1's key order (``validFrom`` kept as ms inside the model)."""
    out = {k: fact[k] for k in ("factId", "subject", "predicate", "value", "space", "actor")}
    out.update(source=fact["source"], provenance=provenance, external=fact["external"])
    out.update(
        validFrom=wire(fact["validFrom"]), validTo=None if valid_to is None else wire(valid_to)
    )
    out.update(confidence=fact["confidence"], forgotten=fact["forgotten"])
    return {k: v for k, v in out.items() if v is not None or k not in ("external", "forgotten")}


class SpecModel:
    """The ledger of SPEC section 2, as a list of events."""

    def __init__(self, clock: Callable[[], datetime], forget_key: str | None = None) -> None:
        self.events: list[Ev] = []
        self.clock = clock  # the ledger's own clock: both read it at the same instants
        self.forget_key = forget_key

    @property
    def now(self) -> int:
        return ms(self.clock())

    # -- brute-force definitions ----------------------------------------------------------------

    def _seen(self, tx: float) -> list[Ev]:
        return [e for e in self.events if e.tx <= tx]

    def _assert(self, fact_id: str) -> Ev | None:
        return next((e for e in self.events if e.kind == "assert" and e.fact_id == fact_id), None)

    @staticmethod
    def _retracted(seen: list[Ev], fact_id: str) -> bool:
        return any(e.kind in ("retract", "forget") and e.fact_id == fact_id for e in seen)

    def _effective(self, seen: list[Ev], fact_id: str) -> Ev | None:
        """2.2.4: the non-retracted superseder, walking through retracted links."""
        found: list[Ev] = []

        def walk(target: str) -> None:
            for e in seen:
                if e.kind == "assert" and e.supersedes == target:
                    if self._retracted(seen, e.fact_id):
                        walk(e.fact_id)
                    else:
                        found.append(e)

        walk(fact_id)
        assert len(found) <= 1, f"two effective superseders of {fact_id}: the rules allow one"
        return found[0] if found else None

    def _shown(self, seen: list[Ev], e: Ev) -> Wire:
        """The fact of assert ``e`` as seen through ``seen`` (2.2 steps 4 and 6)."""
        confirmed = any(c.kind == "confirm" and c.fact_id == e.fact_id for c in seen)
        provenance = "attested" if confirmed else e.fact["provenance"]
        successor = self._effective(seen, e.fact_id)
        return render(e.fact, provenance, successor.fact["validFrom"] if successor else None)

    def held(self, fact_id: str) -> bool:
        last = [e for e in self.events if e.kind in ("hold", "release") and e.fact_id == fact_id]
        return bool(last) and last[-1].kind == "hold"

    def _forgotten(self, fact_id: str) -> bool:
        return any(e.kind == "forget" and e.fact_id == fact_id for e in self.events)

    # -- writes ---------------------------------------------------------------------------------

    def assert_fact(
        self,
        *,
        subject: str,
        predicate: str,
        value: Any,
        space: str,
        actor: str,
        fact_id: Opt = None,
        receipt_id: Opt = None,
        provenance: str = "claimed",
        external: dict[str, str] | None = None,
        valid_from: Any = None,
        confidence: float | None = None,
        supersedes: Opt = None,
        write: bool = True,
    ) -> Wire | None:
        now, fact_id = self.now, fact_id or "00000000-0000-4000-8000-ffffffffffff"
        check_value(value)  # interpretation: argument checks run value, confidence, valid_from
        if confidence is not None and not 0 <= confidence <= 1:
            raise Refused("confidence must be between 0 and 1", "invalid_argument", "confidence")
        start = now if valid_from is None else parse_time(valid_from, "valid_from")
        if self._assert(fact_id) is not None:
            raise Refused(f"fact {fact_id} already exists", "fact_exists")
        if supersedes is not None:
            old = self._assert(supersedes)
            if old is None:
                raise Refused(f"cannot supersede unknown fact {supersedes}", "unknown_fact")
            if self._effective(self.events, supersedes) is not None:
                raise Refused(f"fact {supersedes} is already superseded", "already_superseded")
            if self._retracted(self.events, supersedes):
                raise Refused(f"fact {supersedes} is retracted", "retracted")
            if start < old.fact["validFrom"]:  # equal is allowed
                raise Refused(f"replacement cannot start before {THE_FACT}", "bad_replacement")
            if (subject, predicate) != (old.fact["subject"], old.fact["predicate"]):
                raise Refused(f"a replacement must keep {KEEP} of {THE_FACT}", "bad_replacement")
        if not write:
            return None
        source = {"receiptId": receipt_id}
        fact = dict(factId=fact_id, subject=subject, predicate=predicate, value=value, space=space)
        fact.update(actor=actor, source=source, provenance=provenance, external=external)
        fact.update(validFrom=start, confidence=confidence, forgotten=None)
        event = Ev("assert", now, fact_id, fact=fact, supersedes=supersedes)
        self.events.append(event)
        return event.to_dict()

    def _act(self, kind: str, fact_id: str, body: Wire) -> Wire:
        event = Ev(kind, self.now, fact_id, body=body)
        self.events.append(event)
        return event.to_dict()

    def _known(self, fact_id: str, verb: str) -> Ev:
        event = self._assert(fact_id)
        if event is None:
            raise Refused(f"cannot {verb} unknown fact {fact_id}", "unknown_fact")
        return event

    @staticmethod
    def _body(actor: str, reason: Opt, receipt_id: Opt) -> Wire:
        reasons = {} if reason is None else {"reason": reason}  # a confirm has none (1.2)
        return {"actor": actor, **reasons, "source": {"receiptId": receipt_id}}

    def retract(self, *, fact_id: str, actor: str, reason: str, receipt_id: Opt = None) -> Wire:
        self._known(fact_id, "retract")
        if self._retracted(self.events, fact_id):
            raise Refused(f"fact {fact_id} is already retracted", "already_retracted")
        return self._act("retract", fact_id, self._body(actor, reason, receipt_id))

    def confirm(self, *, fact_id: str, actor: str, receipt_id: Opt = None) -> Wire:
        event = self._known(fact_id, "confirm")
        if self._retracted(self.events, fact_id):
            raise Refused(f"fact {fact_id} is retracted", "retracted")
        confirmed = any(e.kind == "confirm" and e.fact_id == fact_id for e in self.events)
        if event.fact["provenance"] != "claimed" or confirmed:
            raise Refused(f"fact {fact_id} is already attested", "already_attested")
        return self._act("confirm", fact_id, self._body(actor, None, receipt_id))

    def forget(
        self,
        *,
        fact_id: str,
        actor: str,
        reason: str,
        receipt_id: Opt = None,
        keep_digest: bool = True,
    ) -> Wire:
        event = self._known(fact_id, "forget")
        if self._forgotten(fact_id):
            raise Refused(f"fact {fact_id} is already forgotten", "already_forgotten")
        if self.held(fact_id):
            raise Refused(f"fact {fact_id} is on legal hold; release it first", "on_hold")
        data = canonical(event.fact["value"]).encode()
        digest: str | None = None
        if not keep_digest:
            kind = "none"
        elif self.forget_key:
            digest = hmac.new(self.forget_key.encode(), data, hashlib.sha256).hexdigest()
            kind = "hmac-sha256"
        else:
            digest, kind = hashlib.sha256(data).hexdigest(), "sha256"
        for e in self.events:  # every assert of that fact, rewritten in place
            if e.kind == "assert" and e.fact_id == fact_id:
                e.fact["value"] = None
                e.fact["forgotten"] = {
                    "valueDigest": digest,
                    "digestKind": kind,
                    "at": wire(self.now),
                }
        body = {**self._body(actor, reason, receipt_id), "valueDigest": digest, "digestKind": kind}
        return self._act("forget", fact_id, body)

    def hold(self, *, fact_id: str, actor: str, reason: str, receipt_id: Opt = None) -> Wire:
        self._known(fact_id, "hold")
        if self._forgotten(fact_id):
            raise Refused(f"fact {fact_id} is already forgotten", "already_forgotten")
        if self.held(fact_id):
            raise Refused(f"fact {fact_id} is already on hold", "already_on_hold")
        return self._act("hold", fact_id, self._body(actor, reason, receipt_id))

    def release(self, *, fact_id: str, actor: str, reason: str, receipt_id: Opt = None) -> Wire:
        self._known(fact_id, "release")  # interpretation: unknown comes first, as for hold
        if not self.held(fact_id):
            raise Refused(f"fact {fact_id} is not on hold", "not_on_hold")
        return self._act("release", fact_id, self._body(actor, reason, receipt_id))

    def sweep(self, *, before: Any, space: Opt = None, keep_digest: bool = True, **by: Any) -> Any:
        """2.7: forget what ``learned_before`` lists, skipping held facts."""
        forgotten, held = [], []
        for fact in self.learned_before(before, space):
            if self.held(fact["factId"]):
                held.append(fact["factId"])
            else:
                forgotten.append(self.forget(fact_id=fact["factId"], keep_digest=keep_digest, **by))
        return {"forgotten": forgotten, "held": held}

    # -- reads ----------------------------------------------------------------------------------

    def as_of(
        self, *, valid_at: Any = None, tx_at: Any = None, include: str = "all", **where: Opt
    ) -> list[Wire]:
        """2.2, step by step; ``where``: space, subject, predicate."""
        valid = self.now if valid_at is None else parse_time(valid_at, "valid_at")
        tx = self.now if tx_at is None else parse_time(tx_at, "tx_at")
        seen = self._seen(tx)  # step 1
        out = []
        for e in seen:  # step 8: append order
            if e.kind != "assert":
                continue
            if any(want is not None and e.fact[key] != want for key, want in where.items()):
                continue  # step 2
            if self._retracted(seen, e.fact_id):
                continue  # step 3
            shown = self._shown(seen, e)  # steps 4 and 6
            successor = self._effective(seen, e.fact_id)
            end = math.inf if successor is None else successor.fact["validFrom"]
            if not e.fact["validFrom"] <= valid < end:
                continue  # step 5
            if RANK[shown["provenance"]] < INCLUDE[include]:
                continue  # step 7
            out.append(shown)
        return out

    def get(self, fact_id: str) -> Wire | None:
        """2.9: the fact in any state; confirmed provenance shown (2.4); validTo as of now,
        null once retracted (interpretation: 2.2 drops a retracted fact before step 4)."""
        event = self._assert(fact_id)
        if event is None:
            return None
        shown = self._shown(self.events, event)
        if self._retracted(self.events, fact_id):
            shown["validTo"] = None
        return shown

    def _stored(self, e: Ev, confirmed: bool) -> Wire:
        lifted = confirmed and any(
            c.kind == "confirm" and c.fact_id == e.fact_id for c in self.events
        )
        return render(e.fact, "attested" if lifted else e.fact["provenance"], None)

    def facts(self) -> list[Wire]:
        """interpretation: every fact as stored (validTo null), in append order, with the
        confirmed provenance (2.4 names ``facts``)."""
        return [self._stored(e, True) for e in self.events if e.kind == "assert"]

    def history(self, fact_id: str) -> list[Wire]:
        """2.9: its assert, the asserts superseding it, every event citing it; oldest first."""
        return [
            e.to_dict()
            for e in self.events
            if e.fact_id == fact_id or (e.kind == "assert" and e.supersedes == fact_id)
        ]

    def learned_before(self, before: Any, space: Opt = None) -> list[Wire]:
        """2.7: asserted before ``before`` (transaction time), not forgotten; interpretation:
        shown as stored (stored provenance, validTo null)."""
        cutoff = parse_time(before, "before")
        return [
            self._stored(e, False)
            for e in self.events
            if e.kind == "assert"
            and e.tx < cutoff
            and not self._forgotten(e.fact_id)
            and (space is None or e.fact["space"] == space)
        ]

    def spaces(self) -> list[str]:
        return sorted({e.fact["space"] for e in self.events if e.kind == "assert"})

    def count(self) -> int:
        return len(self.events)

    def export(self) -> list[Wire]:
        return [e.to_dict() for e in self.events]

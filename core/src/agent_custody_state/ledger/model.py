"""Facts and events: immutable records with snake_case attributes and the exact wire dicts.

``to_dict()`` returns SPEC section 1 wire JSON: camelCase keys in wire order, timestamps as
strings. Keys this version does not know (written by a newer implementation) are kept in
``extra`` and written back after the known keys, so a round trip changes no line.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal, TypeAlias, TypeVar

from agent_custody_state.canonical import js_json
from agent_custody_state.fastjson import exact, loads, ordered_unchecked
from agent_custody_state.ledger.facts import TEXT_TYPES, unknown_keys
from agent_custody_state.ledger.facts import Fact as Fact
from agent_custody_state.ledger.facts import Forgotten as Forgotten
from agent_custody_state.ledger.facts import Source as Source
from agent_custody_state.ledger.frozen import frozen_init

Provenance = Literal["claimed", "attested", "verified"]
PROVENANCE_RANK: dict[str, int] = {"claimed": 0, "attested": 1, "verified": 2}
EventKind = Literal["assert", "retract", "confirm", "forget", "hold", "release"]


@dataclass(frozen=True, slots=True)
class _EventBase:
    event_id: str
    tx_time: str

    #: The line body, when whoever built the event encoded it already (``chain.seal`` does, as
    #: it encodes the event anyway). Not an argument, so ``replace`` (a forget's rewrite) drops
    #: it; events are immutable, so a line once set stays the event's line.
    line: str | None = field(default=None, init=False, repr=False, compare=False)

    kind: ClassVar[str] = ""

    def to_json(self) -> str:
        """One JSONL line body: compact JSON in wire key order, non-ASCII kept as-is. orjson
        writes it unchecked when the event's fields show it writes what JavaScript writes
        (``plain_json``), else ``js_json`` checks or encodes it."""
        line = self.line
        if line is None:
            data = self.to_dict()  # type: ignore[attr-defined]
            fast = ordered_unchecked(data) if self.plain_json() else None
            line = js_json(data) if fast is None else fast.decode("utf-8")
        return line

    def plain_json(self) -> bool:
        """Whether orjson writes this event's wire dict as JavaScript does, told from its fields
        (each kind lists its own); ``False`` only means "not shown"."""
        return False


@frozen_init
@dataclass(frozen=True, slots=True)
class AssertEvent(_EventBase):
    """A fact entering the ledger; ``supersedes`` names the fact it replaces."""

    fact: Fact
    supersedes: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    kind: ClassVar[str] = "assert"

    @property
    def fact_id(self) -> str:
        return self.fact.fact_id

    def plain_json(self) -> bool:
        return (
            set(map(type, (self.event_id, self.tx_time, self.supersedes))) <= TEXT_TYPES
            and (not self.extra or exact(self.extra, sort=False))
            and self.fact.plain_json()
        )

    def to_dict(self) -> dict[str, Any]:
        out = {
            "eventId": self.event_id,
            "kind": "assert",
            "txTime": self.tx_time,
            "fact": self.fact.to_dict(),
            "supersedes": self.supersedes,
        }
        out.update(self.extra)
        return out


def _plain_action(fields: tuple[Any, ...], source: Source, extra: dict[str, Any]) -> bool:
    """``plain_json`` of an event without a fact: text fields, a source, unknown keys."""
    return (
        set(map(type, (*fields, source.receipt_id))) <= TEXT_TYPES
        and (not extra or exact(extra, sort=False))
        and (not source.extra or exact(source.extra, sort=False))
    )


_ACTION_KEYS = frozenset(("eventId", "kind", "txTime", "factId", "actor", "reason", "source"))
_CONFIRM_KEYS = frozenset(("eventId", "kind", "txTime", "factId", "actor", "source"))
_FORGET_KEYS = _ACTION_KEYS | {"valueDigest", "digestKind"}


@dataclass(frozen=True, slots=True)
class _ActionEvent(_EventBase):
    fact_id: str
    actor: str
    reason: str
    source: Source = field(default_factory=Source)
    extra: dict[str, Any] = field(default_factory=dict)

    def plain_json(self) -> bool:
        fields = (self.event_id, self.tx_time, self.fact_id, self.actor, self.reason)
        return _plain_action(fields, self.source, self.extra)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "eventId": self.event_id,
            "kind": self.kind,
            "txTime": self.tx_time,
            "factId": self.fact_id,
            "actor": self.actor,
            "reason": self.reason,
            "source": self.source.to_dict(),
        }
        out.update(self.extra)
        return out


@frozen_init
@dataclass(frozen=True, slots=True)
class RetractEvent(_ActionEvent):
    """The undo: the fact leaves the present; what it superseded is believed again."""

    kind: ClassVar[str] = "retract"


@frozen_init
@dataclass(frozen=True, slots=True)
class HoldEvent(_ActionEvent):
    """A legal hold: blocks forget and sweep until released."""

    kind: ClassVar[str] = "hold"


@frozen_init
@dataclass(frozen=True, slots=True)
class ReleaseEvent(_ActionEvent):
    """Lifts a legal hold."""

    kind: ClassVar[str] = "release"


@frozen_init
@dataclass(frozen=True, slots=True)
class ConfirmEvent(_EventBase):
    """Lifts a claimed fact out of quarantine (shown as attested from then on)."""

    fact_id: str
    actor: str
    source: Source = field(default_factory=Source)
    extra: dict[str, Any] = field(default_factory=dict)

    kind: ClassVar[str] = "confirm"

    def plain_json(self) -> bool:
        fields = (self.event_id, self.tx_time, self.fact_id, self.actor)
        return _plain_action(fields, self.source, self.extra)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "eventId": self.event_id,
            "kind": "confirm",
            "txTime": self.tx_time,
            "factId": self.fact_id,
            "actor": self.actor,
            "source": self.source.to_dict(),
        }
        out.update(self.extra)
        return out


@frozen_init
@dataclass(frozen=True, slots=True)
class ForgetEvent(_EventBase):
    """Erasure of a fact's value; the digest and this event are the certificate."""

    fact_id: str
    actor: str
    reason: str
    source: Source = field(default_factory=Source)
    value_digest: str | None = None
    digest_kind: str = "none"
    extra: dict[str, Any] = field(default_factory=dict)

    kind: ClassVar[str] = "forget"

    def plain_json(self) -> bool:
        fields = (self.event_id, self.tx_time, self.fact_id, self.actor, self.reason)
        digest = (self.value_digest, self.digest_kind)
        return _plain_action(fields + digest, self.source, self.extra)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "eventId": self.event_id,
            "kind": "forget",
            "txTime": self.tx_time,
            "factId": self.fact_id,
            "actor": self.actor,
            "reason": self.reason,
            "source": self.source.to_dict(),
            "valueDigest": self.value_digest,
            "digestKind": self.digest_kind,
        }
        out.update(self.extra)
        return out


Event: TypeAlias = (
    AssertEvent | RetractEvent | ConfirmEvent | ForgetEvent | HoldEvent | ReleaseEvent
)

EventT = TypeVar("EventT", bound=Event)

_ACTION_CLASSES: dict[str, type[RetractEvent | HoldEvent | ReleaseEvent]] = {
    "retract": RetractEvent,
    "hold": HoldEvent,
    "release": ReleaseEvent,
}


def detached(event: EventT) -> EventT:
    """``event`` with private copies of what a caller may change (``Fact.detached``; a
    source's unknown keys), or itself when it has none: what the ledger hands out of what it
    keeps. Its ``extra`` (unknown keys, the chain record) is shared, read-only, and its encoded
    line, if any, is kept."""
    if isinstance(event, AssertEvent):
        fact = event.fact.detached()
        if fact is event.fact:
            return event
        copy: Event = AssertEvent(
            event.event_id, event.tx_time, fact, event.supersedes, event.extra
        )
    elif not event.source.extra:
        return event
    else:
        copy = replace(event, source=event.source.detached())
    if event.line is not None:
        object.__setattr__(copy, "line", event.line)  # the same text: the copy's own line
    return copy  # type: ignore[return-value]


def handed(event: EventT, keeps_objects: bool) -> EventT:
    """What the ledger hands out of ``event``: ``detached(event)`` when its backend keeps the
    objects its reads return (``EventBackend.keeps_objects``), else ``event``, built for the
    read and no one else's."""
    return detached(event) if keeps_objects else event


def handed_fact(fact: Fact, keeps_objects: bool) -> Fact:
    """``handed`` for a fact (``Fact.detached``)."""
    return fact.detached() if keeps_objects else fact


def event_from_dict(data: dict[str, Any], *, owned: bool = False) -> Event:
    """Build an event from its wire dict; raises ``ValueError`` naming what is wrong.
    ``owned``: ``data`` was parsed for this call and is not kept by anyone else, so an assert's
    dicts are taken apart in place (its leftovers become the event's and the fact's unknown
    keys) instead of copied first (``event_from_json``, the readers of stored lines)."""
    if not isinstance(data, dict):
        raise ValueError("an event must be a JSON object")
    kind = data.get("kind")
    try:
        if kind == "assert":  # popped from a copy, as in ``Fact.from_dict``: the rest is extra
            rest = data if owned else dict(data)
            pop = rest.pop
            del rest["kind"]
            event_id, tx_time, fact = pop("eventId"), pop("txTime"), pop("fact")
            if not isinstance(fact, dict):
                raise ValueError("an assert event's fact must be a JSON object")
            return AssertEvent(
                event_id,
                tx_time,
                Fact.from_dict(fact, owned=owned),
                pop("supersedes", None),
                rest,
            )
        # Positional, with local lookups: every event a read returns is built here.
        get = data.get
        source = get("source")
        src = Source.from_dict(source)
        if kind in _ACTION_CLASSES:
            return _ACTION_CLASSES[kind](
                data["eventId"],
                data["txTime"],
                data["factId"],
                get("actor", ""),
                get("reason", ""),
                src,
                unknown_keys(data, _ACTION_KEYS),
            )
        if kind == "confirm":
            return ConfirmEvent(
                data["eventId"],
                data["txTime"],
                data["factId"],
                get("actor", ""),
                src,
                unknown_keys(data, _CONFIRM_KEYS),
            )
        if kind == "forget":
            return ForgetEvent(
                data["eventId"],
                data["txTime"],
                data["factId"],
                get("actor", ""),
                get("reason", ""),
                src,
                get("valueDigest"),
                get("digestKind", "none"),
                unknown_keys(data, _FORGET_KEYS),
            )
    except KeyError as exc:
        raise ValueError(f"{kind} event is missing {exc.args[0]!r}") from None
    raise ValueError(f"unknown event kind {kind!r}")


def event_from_json(line: str | bytes) -> Event:
    """Build an event from its stored JSON text (the parsed dicts are this call's own)."""
    return event_from_dict(loads(line), owned=True)


#: Kept beside a value and erased with it (the chain's commitment salt, ``ledger.chain``).
VALUE_SALT_KEY = "valueSalt"
#: ``HMAC-SHA256(salt, canonical_json(value))``, kept after a forget (``ledger.chain``).
VALUE_COMMITMENT_KEY = "valueCommitment"
#: The key of an event's chain record (``chain``).
CHAIN_KEY = "chain"


def forget_assert(event: AssertEvent, forgotten: Forgotten) -> AssertEvent:
    """The assert as rewritten by a forget: value null and its salt gone, certificate appended,
    nothing else changed."""
    fact = event.fact
    extra = fact.extra
    if VALUE_SALT_KEY in extra:
        extra = {k: v for k, v in extra.items() if k != VALUE_SALT_KEY}
    return replace(event, fact=replace(fact, value=None, forgotten=forgotten, extra=extra))


def shape_problem(event: Event) -> str | None:
    """Why a decoded event (a hand-edited line or row) cannot be read back, or None: a
    transaction time or fact id that is not text; a subject, predicate, space or ``validFrom``
    that is not text, or a ``supersedes`` that is neither text nor null (SPEC 1.1's types).
    Backends check it as they load events: an index or a query would otherwise fail part-way
    with a ``TypeError`` far from the event (``as_of`` compares ``validFrom`` as a time,
    ``spaces`` sorts the spaces)."""
    if type(event.tx_time) is not str:
        return f"txTime must be text, not {type(event.tx_time).__name__}"
    if type(event.fact_id) is not str:
        return f"factId must be text, not {type(event.fact_id).__name__}"
    if isinstance(event, AssertEvent):
        fact = event.fact
        supersedes = event.supersedes
        if (
            type(fact.subject) is str
            and type(fact.predicate) is str
            and type(fact.space) is str
            and type(fact.valid_from) is str
            and (supersedes is None or type(supersedes) is str)
        ):
            return None  # the common case: five type tests, no tuple built
        for name, value in (
            ("subject", fact.subject),
            ("predicate", fact.predicate),
            ("space", fact.space),
            ("validFrom", fact.valid_from),
            ("supersedes", supersedes),
        ):
            if type(value) is not str and not (name == "supersedes" and value is None):
                return f"{name} must be text, not {_json_type(value)}"
    return None


def _json_type(value: object) -> str:
    """The JSON name of a decoded value's type, for a refusal (``null``, not ``NoneType``)."""
    return "null" if value is None else type(value).__name__

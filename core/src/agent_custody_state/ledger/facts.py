"""Facts: one belief (``Fact``) with its ``Source`` and, once erased, its ``Forgotten`` record.

``Fact.to_dict()`` is the SPEC section 1 wire dict of a fact (camelCase keys in wire order); keys
this version does not know are kept in ``extra`` and written back after the known ones. Events,
which carry facts, are in ``model``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from agent_custody_state.fastjson import exact, safe_number
from agent_custody_state.ledger.frozen import frozen_init

#: The types a text field may hold for orjson to write it as JavaScript does (``fastjson``).
TEXT_TYPES = frozenset((str, type(None)))


#: JSON's immutable types: a copy of a value shares them.
_SCALARS = frozenset((str, int, float, bool, type(None)))


def json_copy(value: Any) -> Any:
    """A private copy of a JSON value: new dicts and lists all the way down (a tuple or another
    mapping becomes the list or dict a stored value reads back as); text, numbers, booleans and
    null are immutable and shared. The ledger keeps a copy of every value it is given and hands
    out copies of what it keeps, so no caller can change, by mutating a dict, what the ledger
    holds in memory (and would answer, digest and rewrite) but not in its files."""
    kind = type(value)
    if kind is dict:  # members tested inline: no call per text or number
        return {k: v if type(v) in _SCALARS else json_copy(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [v if type(v) in _SCALARS else json_copy(v) for v in value]
    if kind in _SCALARS:
        return value
    if isinstance(value, Mapping):
        return {k: json_copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_copy(v) for v in value]
    return value


def unknown_keys(data: dict[str, Any], known: frozenset[str]) -> dict[str, Any]:
    if data.keys() <= known:  # the common case, one C-level set test
        return {}
    return {k: v for k, v in data.items() if k not in known}


_SOURCE_KEYS = frozenset(("receiptId",))
_FORGOTTEN_KEYS = frozenset(("valueDigest", "digestKind", "at"))


@frozen_init
@dataclass(frozen=True, slots=True)
class Source:
    """Where a fact or event came from: the gateway receipt that carried it. ``extra``: keys
    a newer writer put in the source object, kept and written back after ``receiptId``."""

    receipt_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        if self.extra:
            return {"receiptId": self.receipt_id, **self.extra}
        return {"receiptId": self.receipt_id}

    @classmethod
    def from_dict(cls, data: Any) -> Source:
        if isinstance(data, dict):
            return cls(data.get("receiptId"), unknown_keys(data, _SOURCE_KEYS))
        return cls()

    def detached(self) -> Source:
        """This source, with a copy of its unknown keys when it has any (``json_copy``)."""
        return Source(self.receipt_id, json_copy(self.extra)) if self.extra else self


@frozen_init
@dataclass(frozen=True, slots=True)
class Forgotten:
    """The certificate left on a fact whose value was erased (``extra``: a newer writer's
    keys, kept and written back after the known ones)."""

    value_digest: str | None
    digest_kind: str
    at: str
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {"valueDigest": self.value_digest, "digestKind": self.digest_kind, "at": self.at}
        if self.extra:
            out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Forgotten:
        return cls(
            data.get("valueDigest"),
            data.get("digestKind", "none"),
            data.get("at", ""),
            unknown_keys(data, _FORGOTTEN_KEYS),
        )


@frozen_init
@dataclass(frozen=True, slots=True)
class Fact:
    """One belief: subject, predicate, value, with its custody and validity."""

    fact_id: str
    subject: str
    predicate: str
    value: Any
    space: str
    actor: str
    source: Source = field(default_factory=Source)
    provenance: str = "claimed"
    external: dict[str, str] | None = None
    valid_from: str = ""
    valid_to: str | None = None
    confidence: float | None = None
    forgotten: Forgotten | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def receipt_id(self) -> str | None:
        return self.source.receipt_id

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "factId": self.fact_id,
            "subject": self.subject,
            "predicate": self.predicate,
            "value": self.value,
            "space": self.space,
            "actor": self.actor,
            "source": self.source.to_dict(),
            "provenance": self.provenance,
        }
        if self.external:
            out["external"] = dict(self.external)
        out["validFrom"] = self.valid_from
        out["validTo"] = self.valid_to
        out["confidence"] = self.confidence
        if self.forgotten is not None:
            out["forgotten"] = self.forgotten.to_dict()
        out.update(self.extra)
        return out

    def plain_json(self) -> bool:
        """Whether orjson writes this fact's wire dict exactly as JavaScript does, told from its
        fields: a type test for the text fields, ``fastjson.exact`` for the value, external ids
        and unknown keys only (a third of what ``exact`` of the whole dict costs). ``False``
        only means "not shown" (the caller takes the checked path)."""
        forgotten = self.forgotten
        return (
            set(
                map(
                    type,
                    (
                        *(self.fact_id, self.subject, self.predicate, self.space, self.actor),
                        *(self.provenance, self.valid_from, self.valid_to),
                        self.source.receipt_id,
                    ),
                )
            )
            <= TEXT_TYPES
            and (self.confidence is None or safe_number(self.confidence))
            and (
                forgotten is None
                or (
                    set(map(type, (forgotten.value_digest, forgotten.digest_kind, forgotten.at)))
                    <= TEXT_TYPES
                    and (not forgotten.extra or exact(forgotten.extra, sort=False))
                )
            )
            and (not self.source.extra or exact(self.source.extra, sort=False))
            and (not self.external or exact(self.external, sort=False))
            and (not self.extra or exact(self.extra, sort=False))
            and exact(self.value, sort=False)
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, owned: bool = False) -> Fact:
        """The fact of a wire dict. ``owned``: ``data`` is the caller's to take apart (it was
        parsed for this call), so its known keys are popped from it rather than a copy."""
        # Every event a read returns is built here. The known keys are popped, so what is left
        # is the unknown keys in their order (a chained fact has two): cheaper than picking
        # them out after.
        rest = data if owned else dict(data)
        pop = rest.pop
        forgotten = pop("forgotten", None)
        source = pop("source", None)
        external = pop("external", None)
        return cls(
            pop("factId"),
            pop("subject"),
            pop("predicate"),
            pop("value", None),
            pop("space"),
            pop("actor", ""),
            Source.from_dict(source),
            pop("provenance", "claimed"),
            dict(external) if external else None,
            pop("validFrom", ""),
            pop("validTo", None),
            pop("confidence", None),
            Forgotten.from_dict(forgotten) if isinstance(forgotten, dict) else None,
            rest,
        )

    def with_(self, **changes: Any) -> Fact:
        return replace(self, **changes)

    def detached(self) -> Fact:
        """This fact with private copies of what a caller may change (a container value, the
        external ids, a source's unknown keys: ``json_copy``), or itself when it has none:
        what the ledger hands out of what it keeps. ``extra`` (unknown keys and the chain's
        salt and commitment) is the ledger's bookkeeping and is shared, read-only."""
        value, source = self.value, self.source
        if type(value) in _SCALARS and not self.external and not source.extra:
            return self
        return Fact(
            self.fact_id,
            self.subject,
            self.predicate,
            json_copy(value),
            self.space,
            self.actor,
            source.detached(),
            self.provenance,
            dict(self.external) if self.external else self.external,
            self.valid_from,
            self.valid_to,
            self.confidence,
            self.forgotten,
            self.extra,
        )

    def presented(self, valid_to: str | None, provenance: str) -> Fact:
        """The fact as a read shows it: ``validTo`` from its superseder and the provenance
        after confirmation. ``with_(valid_to=..., provenance=...)``, built directly (every
        read result goes through here, and ``replace`` costs several times more)."""
        if valid_to == self.valid_to and provenance == self.provenance:
            return self
        return Fact(
            self.fact_id,
            self.subject,
            self.predicate,
            self.value,
            self.space,
            self.actor,
            self.source,
            provenance,
            self.external,
            self.valid_from,
            valid_to,
            self.confidence,
            self.forgotten,
            self.extra,
        )

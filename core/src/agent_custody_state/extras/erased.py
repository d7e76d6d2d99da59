"""The values a receipt holds that the ledger has forgotten, hidden wherever an extra shows a
receipt to the operator (``explain``'s text, the review pages, the review's ``/r/<id>.json``).

The gateway's signed receipts hold each call's arguments and result, so a forgotten belief's
value stays in the receipt that wrote it (and in every read that returned it) until the
gateway's ``prune`` deletes the receipt. The extras do not control those files, but they do not
print what they hold of an erased value either. A value is erased here when, in a receipt's
statement (and in the JSON inside it: a result's text items, an embedded envelope's payload),
an object's ``value`` member belongs to a forgotten fact:

- the object names the fact (``factId``: a read's result, a write's echoed fact);
- the receipt is the one the fact cites as its source, and the object names the fact's subject
  and predicate (the write's own arguments);
- or it is a lookup the gateway made (``facts[name].value``), the forget kept a plain ``sha256``
  digest of the value, and the lookup's digest equals it (a verified write copies its value
  from such a lookup; elsewhere a digest match would hide a common value wherever it appears).

In JSON the member becomes ``{"erased": true, "factId", "valueDigest", "digestKind"}`` (never a
string, so it cannot be read as the value); in text it is ``(erased)``. Signed packs are not
redacted (SPEC-EXTRAS 4: a pack carries the receipts as the gateway signed them).
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from agent_custody_state.canonical import canonical_bytes, js_json
from agent_custody_state.extras.bundles import decode_statement
from agent_custody_state.extras.jsview import at, compact, parse
from agent_custody_state.extras.ledgerview import Snapshot, fresh
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.model import Fact
from agent_custody_state.signing import b64decode_lenient

#: What an operator reads next to a receipt that held an erased value.
STILL_HELD = (
    "values shown (erased) are forgotten in the ledger; the gateway's receipt file still holds "
    "them until the gateway's prune deletes that receipt"
)
#: What a verdict says when the receipt shown was redacted: the signature covers the stored bytes.
CHECKED_AS_STORED = "checked on the receipt as stored, before its erased values were hidden here"
_NESTED = 2  # JSON inside a string or an envelope's payload, decoded this many levels down
_DEEPEST = 400  # levels the walk descends in all (``_Walk``)


@dataclass(frozen=True)
class Erased:
    """One forgotten fact: what identifies its value in a receipt."""

    fact_id: str
    receipt_id: str | None
    subject: str
    predicate: str
    value_digest: str | None
    digest_kind: str

    def marker(self) -> dict[str, Any]:
        return {
            "erased": True,
            "factId": self.fact_id,
            "valueDigest": self.value_digest,
            "digestKind": self.digest_kind,
        }


@dataclass
class Erasures:
    """Every forgotten fact of a ledger, indexed the three ways a receipt can hold its value."""

    by_fact: dict[str, Erased] = field(default_factory=dict)
    by_receipt: dict[str, list[Erased]] = field(default_factory=dict)
    by_digest: dict[str, Erased] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.by_fact)

    def written(self, node: dict[str, Any], receipt_id: Any) -> Erased | None:
        """The forgotten fact ``receipt_id`` wrote whose subject and predicate ``node`` names."""
        for e in self.by_receipt.get(receipt_id, []) if isinstance(receipt_id, str) else []:
            if node.get("subject") == e.subject and node.get("predicate") == e.predicate:
                return e
        return None

    def match(self, node: dict[str, Any], receipt_id: Any, lookup: bool = False) -> Erased | None:
        """The forgotten fact whose value ``node["value"]`` is, or ``None``; by its digest only
        for a gateway ``lookup`` (elsewhere a common value, ``true`` or ``20``, would be hidden
        wherever it appears)."""
        hit = self.by_fact.get(node["factId"]) if isinstance(node.get("factId"), str) else None
        if hit is not None:
            return hit
        hit = self.written(node, receipt_id)
        if hit is not None or not lookup or not self.by_digest:
            return hit
        try:
            digest = hashlib.sha256(canonical_bytes(node["value"])).hexdigest()
        except (TypeError, ValueError):
            return None
        return self.by_digest.get(digest)


def erasures(ledger: Ledger | None, known: Snapshot | None = None) -> Erasures | None:
    """The forgotten facts of ``ledger`` (``None`` without a ledger). ``known``: a snapshot the
    caller read, used while the ledger holds exactly its events (``ledgerview.fresh``)."""
    if ledger is None:
        return None
    if known is not None:
        with ledger.backend.reading():
            return snapshot_erasures(fresh(ledger, known))
    with ledger.backend.reading():
        ledger.backend.refresh()
        facts = ledger.facts()
    return erasures_of(facts)


def snapshot_erasures(snap: Snapshot) -> Erasures:
    """The forgotten facts of a snapshot the caller holds fresh, worked out once per snapshot."""
    if "erasures" not in snap.memo:
        snap.memo["erasures"] = erasures_of(snap.facts)
    found: Erasures = snap.memo["erasures"]
    return found


def erasures_of(facts: Iterable[Fact]) -> Erasures:
    """The forgotten facts among ``facts``, indexed (``Erasures``)."""
    out = Erasures()
    for f in facts:
        if f.forgotten is None:
            continue
        digest, kind = f.forgotten.value_digest, f.forgotten.digest_kind
        e = Erased(f.fact_id, f.source.receipt_id, f.subject, f.predicate, digest, kind)
        out.by_fact[e.fact_id] = e
        if e.receipt_id:
            out.by_receipt.setdefault(e.receipt_id, []).append(e)
        if e.digest_kind == "sha256" and isinstance(e.value_digest, str):
            out.by_digest[e.value_digest] = e
    return out


class _Walk:
    """One receipt's walk. JSON in a string or a payload is decoded ``_NESTED`` levels down,
    and the walk descends at most ``_DEEPEST`` levels in all: a receipt parses at most 300
    levels deep, but a text inside it may nest as deep again, and Python's recursion would not
    reach the bottom (a value of a real receipt sits a few levels down)."""

    def __init__(self, found: Erasures, receipt_id: Any, marker: Callable[[Erased], Any]) -> None:
        self.found, self.receipt_id, self.marker = found, receipt_id, marker
        self.count = 0

    def node(self, value: Any, nested: int, depth: int, lookup: bool = False) -> Any:
        if depth > _DEEPEST:
            return value
        if isinstance(value, list):
            items = []
            for v in value:
                items.append(self.node(v, nested, depth + 1))
            return items
        if isinstance(value, str):
            return self.text(value, nested, depth)
        if not isinstance(value, dict):
            return value
        if "request" in value and isinstance(value.get("facts"), dict):
            value = self.evidence(value)
        hit = self.found.match(value, self.receipt_id, lookup) if "value" in value else None
        lookups = "request" in value and isinstance(value.get("facts"), dict)  # a predicate
        out: dict[str, Any] = {}
        for k, v in value.items():
            if k == "value" and hit is not None:
                self.count += 1
                out[k] = self.marker(hit)
            elif k == "payload" and isinstance(v, str) and "payloadType" in value:
                out[k] = self.payload(v, nested, depth)
            elif k == "facts" and lookups:
                out[k] = {n: self.node(f, nested, depth + 2, True) for n, f in v.items()}
            else:
                out[k] = self.node(v, nested, depth + 1)
        return out

    def evidence(self, p: dict[str, Any]) -> dict[str, Any]:
        """A verified write (``evidence: {fact, path}``) of a forgotten fact: the value is also
        in the lookup the gateway made (``facts[fact].value`` at ``path``), hidden there too."""
        args = at(p, "request", "args")
        name, path = at(args, "evidence", "fact"), at(args, "evidence", "path")
        if not isinstance(args, dict) or not isinstance(name, str):
            return p
        hit = self.found.written(args, self.receipt_id)
        lookup = p["facts"].get(name)
        if hit is None or not isinstance(lookup, dict) or "value" not in lookup:
            return p
        steps = path.split(".") if isinstance(path, str) and path else []
        shown = _replaced(lookup["value"], steps, self.marker(hit))
        if shown is _ABSENT:
            return p
        self.count += 1
        return {**p, "facts": {**p["facts"], name: {**lookup, "value": shown}}}

    def text(self, value: str, nested: int, depth: int) -> str:
        """A string holding JSON (a tool result's text item), redacted inside."""
        if nested >= _NESTED or value.lstrip()[:1] not in ("{", "["):
            return value
        try:
            parsed = parse(value)
        except ValueError:
            return value
        before = self.count
        redacted = self.node(parsed, nested + 1, depth + 1)
        return js_json(redacted) if self.count > before else value

    def payload(self, value: str, nested: int, depth: int) -> str:
        """An embedded DSSE envelope's payload (a precommitted call's authorization)."""
        if nested >= _NESTED:
            return value
        try:
            parsed = parse(b64decode_lenient(value))
        except ValueError:
            return value
        before = self.count
        redacted = self.node(parsed, nested + 1, depth + 1)
        if self.count == before:
            return value
        return base64.b64encode(canonical_bytes(redacted)).decode("ascii")


_ABSENT = object()


def _replaced(value: Any, steps: list[str], marker: Any) -> Any:
    """``value`` with the member at ``steps`` (the server's evidence path: keys, and canonical
    array indexes) replaced by ``marker``; ``_ABSENT`` when a step does not exist."""
    if not steps:
        return marker
    step, rest = steps[0], steps[1:]
    if isinstance(value, dict) and step in value:
        inner = _replaced(value[step], rest, marker)
        return _ABSENT if inner is _ABSENT else {**value, step: inner}
    canonical = step.isascii() and step.isdigit() and (step == "0" or step[0] != "0")
    if isinstance(value, list) and canonical and int(step) < len(value):
        inner = _replaced(value[int(step)], rest, marker)
        return (
            _ABSENT if inner is _ABSENT else [*value[: int(step)], inner, *value[int(step) + 1 :]]
        )
    return _ABSENT


def redact(
    value: Any, found: Erasures | None, receipt_id: Any, marker: Callable[[Erased], Any]
) -> tuple[Any, int]:
    """``value`` (a receipt's predicate, or part of one) with each erased value replaced by
    ``marker(fact)``, and how many were replaced; ``value`` itself is never changed."""
    if not found:
        return value, 0
    walk = _Walk(found, receipt_id, marker)
    out = walk.node(value, 0, 0)
    return (out, walk.count) if walk.count else (value, 0)


class TextMarker:
    """``(erased)`` in a compact JSON text: a token no receipt can hold, replaced after printing."""

    def __init__(self) -> None:
        self.token = f"\u0000erased-{secrets.token_hex(8)}"
        self._quoted = compact(self.token)

    def __call__(self, _fact: Erased) -> str:
        return self.token

    def compact(self, value: Any) -> str:
        return compact(value).replace(self._quoted, "(erased)")


def redacted_bundle(bundle: Any, found: Erasures | None) -> tuple[Any, int]:
    """A bundle whose statement holds no erased value, for the review's ``/r/<id>.json``: the
    payload re-encoded (its signature no longer verifies over it) and an ``erased`` note beside
    the envelope; the bundle itself when nothing was erased."""
    if not found:
        return bundle, 0
    try:
        statement = decode_statement(bundle)
    except ValueError:
        return bundle, 0
    receipt_id = at(statement, "predicate", "receiptId")
    redacted, count = redact(statement, found, receipt_id, Erased.marker)
    if not count:
        return bundle, 0
    envelope = dict(bundle["envelope"])
    envelope["payload"] = base64.b64encode(canonical_bytes(redacted)).decode("ascii")
    note = {
        "note": "values the ledger has forgotten are replaced by {erased: true, ...}; the "
        "signatures were made over the receipt as the gateway stored it and do not verify over "
        "this copy; the gateway's receipt file still holds the values until the gateway's "
        "prune deletes it",
        "values": count,
    }
    return {**bundle, "envelope": envelope, "erased": note}, count


__all__ = [
    "CHECKED_AS_STORED",
    "STILL_HELD",
    "Erased",
    "Erasures",
    "TextMarker",
    "erasures",
    "erasures_of",
    "redact",
    "redacted_bundle",
    "snapshot_erasures",
]

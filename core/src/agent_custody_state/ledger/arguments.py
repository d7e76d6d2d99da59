"""Argument checks of the ledger's mutations, and building an assert from them.

Every caller-supplied value is checked here before any store is touched, with a ``LedgerError``
naming the Python parameter (``field``), so the rules in ``ledger.py`` only ever see well-formed
events.
"""

from __future__ import annotations

import json
import math
import os
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from agent_custody_state import canonical
from agent_custody_state.canonical import DigestKind
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.factargs import confidence_arg, provenance_arg
from agent_custody_state.ledger.keptvalues import kept_value
from agent_custody_state.ledger.model import AssertEvent, Fact, Source
from agent_custody_state.ledger.requests import AssertRequest, TimeLike
from agent_custody_state.timeutil import TimeFormatError, normalize_time


def new_id() -> str:
    return str(uuid.uuid4())


def new_ids(count: int) -> Iterator[str]:
    """``count`` fresh random (version 4) UUIDs as strings, from one read of the system's
    random source: bulk ingest draws two per event, and ``uuid.uuid4()`` costs several times
    the formatting done here."""
    raw = bytearray(os.urandom(16 * count))
    raw[6::16] = bytes((b & 0x0F) | 0x40 for b in raw[6::16])  # version 4
    raw[8::16] = bytes((b & 0x3F) | 0x80 for b in raw[8::16])  # RFC 4122 variant
    text = raw.hex()
    for i in range(0, 32 * count, 32):
        h = text[i : i + 32]
        yield f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def time_arg(value: TimeLike | None, name: str) -> str | None:
    if value is None:
        return None
    try:
        return normalize_time(value)
    except TimeFormatError as exc:
        raise LedgerError(f"{name}: {exc}", field=name) from None


def required_time_arg(value: TimeLike | None, name: str) -> str:
    """``time_arg`` for an argument that must be given (a sweep's ``before``: a missing one
    must never read as "everything up to now")."""
    cutoff = time_arg(value, name)
    if cutoff is None:
        raise LedgerError(f"{name} is required", field=name)
    return cutoff


def bool_arg(value: object, name: str) -> bool:
    """A flag given as a bool, not as anything truthy ("no" would read as True)."""
    if not isinstance(value, bool):
        raise LedgerError(f"{name} must be true or false", field=name)
    return value


def value_digest(
    value: Any, *, forget_key: str | None, keep_digest: bool = True
) -> tuple[str | None, DigestKind]:
    """``canonical.value_digest`` as the public API gives it: ``keep_digest`` a bool only."""
    keep = bool_arg(keep_digest, "keep_digest")
    return canonical.value_digest(value, forget_key=forget_key, keep_digest=keep)


#: The most a key may hold, in UTF-8 bytes: a subject, predicate or space, a fact or event id.
#: Keys are index keys, and PostgreSQL's btree refuses an index row over 2,704 bytes (SPEC 3's
#: indexes hold one or two keys), at INSERT, with a raw driver error; JSONL and SQLite have no
#: such limit. One limit for every backend keeps a ledger movable between them.
MAX_KEY_BYTES = 2048
#: Subject and predicate share one index row (``events_subject``): together at most this.
MAX_TOPIC_BYTES = 2600


def text_arg(value: object, name: str, *, empty_ok: bool = False, key: bool | None = None) -> str:
    """``value`` if it is text; a ``LedgerError`` naming ``name`` otherwise.

    A lone surrogate is refused in every text. A ``key`` (by default: text that must not be
    empty, which is what every key is) is held to what a SQL key column can hold: no U+0000
    (PostgreSQL's text refuses it) and at most ``MAX_KEY_BYTES`` bytes of UTF-8, so a key that
    one backend takes, every backend takes. A fact id naming a fact the ledger holds is not a
    new key (``key=False``): a fact an earlier version or the original wrote under such an id
    (JSONL and SQLite took it) can still be retracted, held and forgotten; an id the ledger
    does not know is refused by these rules, naming what is wrong."""
    if type(value) is not str:
        if not isinstance(value, str):
            raise LedgerError(f"{name} must be a string", field=name)
        value = str.__str__(value)  # plain text, as it reads back: not the caller's subclass
    if not empty_ok and not value:
        raise LedgerError(f"{name} must not be empty", field=name)
    size = len(value)
    if not value.isascii():
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError as exc:
            # JSON can escape it, but no SQL text column can hold it: refused on every backend
            # alike, so a ledger moves between backends whole.
            bad = value[exc.start : exc.end]
            raise LedgerError(
                f"{name} has a lone surrogate ({bad!r}): pass valid Unicode", field=name
            ) from None
    if key if key is not None else not empty_ok:
        problem = key_problem(name, value, size)
        if problem is not None:
            raise LedgerError(problem, field=name)
    return value


def key_problem(name: str, value: str, size: int | None = None) -> str | None:
    """Why ``value`` cannot be the key ``name`` on every backend (U+0000, more than
    ``MAX_KEY_BYTES`` of UTF-8; ``size``: that length, when known), or None. Exported to
    backend plugins (``agent_custody_state.plugin``), which hold appended events to it."""
    if "\x00" in value:
        return f"{name} holds U+0000 (NUL), which a SQL text column cannot hold: remove it"
    if size is None:
        size = len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_KEY_BYTES:
        return f"{name} is too long: {size} bytes in UTF-8; the limit is {MAX_KEY_BYTES}"
    return None


def topic_problem(subject: str, predicate: str) -> str | None:
    """Why subject and predicate do not fit one index row together, or None."""
    size = len(subject.encode("utf-8", "surrogatepass"))
    size += len(predicate.encode("utf-8", "surrogatepass"))
    if size > MAX_TOPIC_BYTES:
        return (
            f"subject and predicate are too long together: {size} bytes in UTF-8; the limit is "
            f"{MAX_TOPIC_BYTES} (they make one index key)"
        )
    return None


def topic_arg(subject: str, predicate: str) -> None:
    """Subject and predicate (each checked by ``text_arg``) fit one index row together."""
    problem = topic_problem(subject, predicate)
    if problem is not None:
        raise LedgerError(problem, field="subject")


# The wire keys of retract and forget events (SPEC 1.2): ``extra`` may add keys, not replace these.
# ``chain`` is the ledger's own too (``ledger.chain``).
ACTION_WIRE_KEYS = frozenset(
    {"eventId", "kind", "txTime", "factId", "actor", "reason", "source", "chain"}
)
FORGET_WIRE_KEYS = ACTION_WIRE_KEYS | {"valueDigest", "digestKind"}


#: Deepest nesting a value may have. Far beyond what the MCP transports carry (their JSON parser
#: stops near 200 levels), and far enough below the interpreter's recursion limit that encoding,
#: digesting and reading the value back can never fail on it.
MAX_VALUE_DEPTH = 256

#: The integers every JSON parser reads back exactly (RFC 7493 I-JSON, section 2.2): beyond
#: +-(2**53 - 1) JavaScript's parser, and so the TypeScript original, rounds them.
MAX_EXACT_INT = 2**53 - 1


def _member(path: str, key: str) -> str:
    return f"{path}.{key}" if key.isidentifier() else f"{path}[{json.dumps(key)}]"


def _number_problem(item: int | float) -> str | None:
    """Why a number cannot be kept exactly in JSON, or None."""
    if isinstance(item, bool):
        return None
    if isinstance(item, int):
        if -MAX_EXACT_INT <= item <= MAX_EXACT_INT:
            return None
        # str() of a huge int is slow (and refused past 4300 digits): estimate its length.
        digits = (
            str(item)
            if item.bit_length() < 200
            else f"an integer of about {int(item.bit_length() * math.log10(2)) + 1} digits"
        )
        return (
            f"{digits} is outside the integers JSON keeps exactly "
            f"(-(2^53 - 1) to 2^53 - 1); send it as a string"
        )
    if math.isnan(item):
        return "NaN is not JSON"
    if math.isinf(item):
        return f"{'-' if item < 0 else ''}Infinity is not JSON"
    return None


def _plain_json(item: Any, depth: int = 0) -> bool:
    """Whether ``value_arg`` accepts ``item`` at once: the exact built-in JSON types only, so
    the common value is checked without building a path string per member (a value this
    refuses, or of another type, takes ``value_arg``'s full walk, which decides and names the
    place)."""
    kind = type(item)
    if kind is str or item is None or kind is bool:
        return depth <= MAX_VALUE_DEPTH
    if depth >= MAX_VALUE_DEPTH:
        return False
    if kind is int:
        return bool(-MAX_EXACT_INT <= item <= MAX_EXACT_INT)
    if kind is float:
        return math.isfinite(item)
    if kind is dict:
        for key, member in item.items():
            if type(key) is not str or not _plain_json(member, depth + 1):
                return False
        return True
    if kind is list:
        return all(_plain_json(member, depth + 1) for member in item)
    return False


def value_arg(value: Any, name: str = "value") -> Any:
    """Refuse a value JSON cannot keep exactly (I-JSON, RFC 7493): NaN, +-Infinity, integers
    beyond +-(2^53 - 1), anything that is not JSON (a set, a date, a non-string key), or a value
    nested too deeply. The message names the place: ``value.seats[1]: NaN is not JSON``.

    Without this such a value was stored as null or rounded, or failed deep inside the encoder
    (a TypeError or RecursionError, reported by the server as an internal error). Walked
    iteratively, in document order, so the first problem is the one reported. ``name``: what
    the value is called in the message and the error's field (``fact_extra.<key>``).
    """
    if _plain_json(value):
        return value
    stack: list[tuple[Any, str, int]] = [(value, name, 0)]
    while stack:
        item, path, depth = stack.pop()
        if depth > MAX_VALUE_DEPTH:
            raise LedgerError(
                f"{name} is nested too deeply (more than {MAX_VALUE_DEPTH} levels)", field=name
            )
        if item is None or isinstance(item, str):
            continue
        if isinstance(item, int | float):
            problem = _number_problem(item)
            if problem is not None:
                raise LedgerError(f"{path}: {problem}", field=name)
        elif isinstance(item, list | tuple):
            stack.extend(reversed([(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(item)]))
        elif isinstance(item, Mapping):
            members = []
            for key, v in item.items():
                if not isinstance(key, str):
                    raise LedgerError(
                        f"{name} must be JSON: {path} has a {type(key).__name__} key",
                        field=name,
                    )
                members.append((v, _member(path, key), depth + 1))
            stack.extend(reversed(members))
        else:
            raise LedgerError(f"{name} must be JSON: {path} is a {type(item).__name__}", field=name)
    return value


def extra_arg(extra: Mapping[str, Any] | None, wire: frozenset[str]) -> dict[str, Any]:
    """An event's ``extra``: text keys, none of ``wire``, to values held to ``value_arg``'s
    rules and kept as read back (NaN was written as null, 2^70 rounded, bytes failed mid-seal)."""
    if extra is None or (isinstance(extra, Mapping) and not extra):
        return {}
    if not isinstance(extra, Mapping):
        raise LedgerError(f"extra must be a mapping, not a {type(extra).__name__}", field="extra")
    odd = [type(k).__name__ for k in extra if not isinstance(k, str)]
    if odd:
        raise LedgerError(f"extra keys must be text, not {odd[0]}", field="extra")
    clash = sorted(k for k in extra if k in wire)
    if clash:
        raise LedgerError(f"extra must not replace the event's own keys: {clash}", field="extra")
    kept: dict[str, Any] = kept_value({k: value_arg(v, f"extra.{k}") for k, v in extra.items()})
    return kept


#: The keys a fact's ``fact_extra`` must not set: the fact's own and the chain's.
_FACT_OWN_KEYS = frozenset(
    {
        *("factId", "subject", "predicate", "value", "space", "actor", "source", "provenance"),
        *("external", "validFrom", "validTo", "confidence", "forgotten"),
        *("valueSalt", "valueCommitment"),
    }
)


def fact_extra(extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """``AssertRequest.fact_extra`` checked: a mapping of unknown keys to values JSON keeps
    exactly (``value_arg``'s rules), copied."""
    if not extra:
        return {}
    if not isinstance(extra, Mapping):
        raise LedgerError(
            f"fact_extra must be a mapping of keys to JSON values, not {type(extra).__name__}",
            field="fact_extra",
        )
    odd = sorted(repr(k) for k in extra if not isinstance(k, str))
    if odd:
        raise LedgerError(f"fact_extra keys must be text: {', '.join(odd)}", field="fact_extra")
    clash = sorted(k for k in extra if k in _FACT_OWN_KEYS)
    if clash:
        raise LedgerError(
            f"fact_extra must not set the fact's own keys: {clash}", field="fact_extra"
        )
    return {str.__str__(k): kept_value(value_arg(v, f"fact_extra.{k}")) for k, v in extra.items()}


def build_assert(
    now: Callable[[], str], request: AssertRequest, ids: Iterator[str] | None = None
) -> AssertEvent:
    """Validate ``assert_fact``'s arguments and build the event (``now`` stamps it; ``ids``
    supplies the fresh ids, by default ``new_id``)."""
    r = request
    subject, predicate, value, space, actor = r.subject, r.predicate, r.value, r.space, r.actor
    receipt_id, provenance, external = r.receipt_id, r.provenance, r.external
    valid_from, confidence, supersedes, fact_id = (
        r.valid_from,
        r.confidence,
        r.supersedes,
        r.fact_id,
    )
    subject, predicate = text_arg(subject, "subject"), text_arg(predicate, "predicate")
    if len(subject) + len(predicate) > MAX_TOPIC_BYTES // 4:  # their bytes may exceed the limit
        topic_arg(subject, predicate)
    space, actor = text_arg(space, "space"), text_arg(actor, "actor", empty_ok=True)
    value_arg(value)
    if receipt_id is not None:
        receipt_id = text_arg(receipt_id, "receipt_id", empty_ok=True)
    provenance, confidence = provenance_arg(provenance), confidence_arg(confidence)
    if external is not None and (
        not isinstance(external, Mapping)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in external.items())
    ):
        raise LedgerError("external must map store names to string ids", field="external")
    if fact_id is not None:
        fact_id = text_arg(fact_id, "fact_id")
    if supersedes is not None:
        supersedes = text_arg(supersedes, "supersedes")
    # Transaction time is the ledger's clock, never the caller's: backdating it would let a
    # writer rewrite what the ledger "knew" in the past.
    tx = now()
    vf = time_arg(valid_from, "valid_from") or tx
    fact = Fact(  # positional: bulk ingest builds one per item
        fact_id or (next(ids) if ids is not None else new_id()),
        subject,
        predicate,
        kept_value(value),  # the ledger's own (the caller's dict may change), as read back
        space,
        actor,
        Source(receipt_id),
        provenance,
        kept_value(external) if external else None,
        vf,
        None,
        confidence,
        None,
        fact_extra(r.fact_extra),
    )
    event_id = next(ids) if ids is not None else new_id()
    return AssertEvent(event_id, tx, fact, supersedes)


def restamp(event: AssertEvent, tx: str, request: AssertRequest) -> AssertEvent:
    """``event`` (built by ``build_assert`` from ``request``) stamped at ``tx`` instead: its
    ``validFrom`` moves with it when the request gave none."""
    if tx == event.tx_time:
        return event
    fact = event.fact if request.valid_from is not None else replace(event.fact, valid_from=tx)
    return replace(event, tx_time=tx, fact=fact)

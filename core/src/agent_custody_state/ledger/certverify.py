"""Checking an erasure certificate (``certificate``): its signature, its shape, and its ledger.

``check_certificate`` verifies the DSSE signature with the given public key, then the in-toto
statement's shape (the predicate type, one subject, the predicate's fields and types, an outcome
that agrees with its own scan and stores). With the ledger's stored events (``check_against``)
it also checks that the ledger is the certificate's (its origin), that the chain head after the
forget is the one the ledger records at that position (and the head before, at its own), that
the ledger's chain verifies (``verify.verify_lines``), and that the fact's assert is forgotten
with the subject's digest. The first failure is the reason; docs/proofs.md lists them.

A certificate is read strictly (``read_json``): base64 as RFC 4648 writes it, UTF-8, no key
twice, no ``NaN``: what two readers could read differently is refused, never guessed at. The
offline verifier (``agent_custody_state_conformance.offline``) applies the same rules.
"""

from __future__ import annotations

import binascii
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from agent_custody_state.keys import PublicKeyRef
from agent_custody_state.ledger.certificate import PREDICATE_TYPE
from agent_custody_state.ledger.checkpoints import ORIGIN_PREFIX
from agent_custody_state.ledger.verify import verify_lines
from agent_custody_state.signing import IN_TOTO_TYPE, STATEMENT_TYPE, dsse_verify

_HEX64 = re.compile(r"[0-9a-f]{64}")
_FIELDS = (
    "media",
    "confidentiality",
    "sanitization",
    "tool",
    "verification",
    "destination",
    "sanitizer",
    "verifier",
    "request",
    "legalHolds",
    "chain",
    "residualWindows",
    "stores",
    "outcome",
    "incomplete",
)


#: The predicate's sections that are JSON objects (the rest: ``residualWindows`` and
#: ``incomplete`` lists, ``destination`` and ``outcome`` strings).
_NOT_OBJECTS = ("destination", "residualWindows", "outcome", "incomplete")
_OBJECTS = tuple(name for name in _FIELDS if name not in _NOT_OBJECTS)


class CertificateError(ValueError):
    """The certificate does not hold; the message is the first reason."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    made = dict(pairs)
    if len(made) != len(pairs):
        raise CertificateError("a JSON object has a key twice: readers disagree on its value")
    return made


def _constant(name: str) -> Any:
    raise CertificateError(f"{name} is not JSON")


def read_json(data: bytes | str) -> Any:
    """JSON as a certificate must be: UTF-8, no key twice (``CertificateError``), no ``NaN``
    or ``Infinity``, numbers as ``JSON.parse`` reads them; ``ValueError`` if it is no JSON."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    try:
        return json.loads(
            text, object_pairs_hook=_pairs, parse_constant=_constant, parse_int=_js_int
        )
    except RecursionError:
        raise ValueError("JSON nested too deeply to parse") from None


def _js_int(text: str) -> int | float:
    """``JSON.parse`` keeps numbers as doubles: integers past 2**53 lose their low digits."""
    number = int(text)
    return number if -(2**53) < number < 2**53 else float(number)


def _base64(text: Any, what: str) -> bytes:
    """``text`` decoded, if it is base64 exactly as RFC 4648 section 4 writes it (padding, no
    other characters): another spelling is an edit, and other decoders read other bytes."""
    try:
        raw = binascii.a2b_base64(text, strict_mode=True) if isinstance(text, str) else None
    except (binascii.Error, ValueError):
        raw = None
    if raw is None or binascii.b2a_base64(raw, newline=False).decode("ascii") != text:
        raise CertificateError(f"{what} is not standard base64 (RFC 4648, padded)")
    return raw


def _head(predicate: dict[str, Any], which: str) -> tuple[int, str]:
    head = predicate["chain"].get(which)
    size = head.get("size") if isinstance(head, dict) else None
    value = head.get("head") if isinstance(head, dict) else None
    if (
        type(size) is not int
        or size < 0
        or not isinstance(value, str)
        or not _HEX64.fullmatch(value)
        or (size == 0 and value != "0" * 64)
    ):
        raise CertificateError(f"chain.{which} is not {{size, head}} with a 64-hex head")
    return size, value


def check_certificate(envelope: Any, key: PublicKeyRef | Sequence[PublicKeyRef]) -> dict[str, Any]:
    """The statement of a good certificate; ``CertificateError`` with the first reason. Several
    keys (the keys before and after a rotation): a signature by any of them, the first
    signature by one of them deciding (``dsse_verify``); ``signer`` says which."""
    checked = dsse_verify(envelope, [key] if isinstance(key, PublicKeyRef) else list(key))
    if not checked.ok:
        raise CertificateError(f"signature: {checked.error}")
    if envelope.get("payloadType") != IN_TOTO_TYPE:
        raise CertificateError(f"payloadType is not {IN_TOTO_TYPE}")
    # ``dsse_verify`` decodes base64 as leniently as Node; a certificate's must be exact.
    payload = _base64(envelope.get("payload"), "the payload")
    for entry in envelope["signatures"]:
        if isinstance(entry, dict) and entry.get("keyid") == checked.keyid:
            _base64(entry.get("sig"), "the signature")  # the one ``dsse_verify`` checked
            break
    try:
        statement = read_json(payload)
    except CertificateError:
        raise
    except ValueError:
        raise CertificateError("the payload is not JSON in UTF-8") from None
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        raise CertificateError(f"the payload is not an in-toto statement ({STATEMENT_TYPE})")
    if statement.get("predicateType") != PREDICATE_TYPE:
        raise CertificateError(f"predicateType is not {PREDICATE_TYPE}")
    subject = statement.get("subject")
    if not (
        isinstance(subject, list)
        and len(subject) == 1
        and isinstance(subject[0], dict)
        and isinstance(subject[0].get("name"), str)
        and isinstance(subject[0].get("digest"), dict)
    ):
        raise CertificateError("subject is not one {name: factId, digest}")
    predicate = statement.get("predicate")
    if not isinstance(predicate, dict):
        raise CertificateError("predicate is not an object")
    missing = [name for name in _FIELDS if name not in predicate]
    if missing:
        raise CertificateError(f"predicate lacks {', '.join(missing)}")
    wrong = [name for name in _OBJECTS if not isinstance(predicate[name], dict)]
    wrong += [n for n in ("residualWindows", "incomplete") if not isinstance(predicate[n], list)]
    if wrong:
        raise CertificateError(f"predicate's {', '.join(wrong)}: not of the certificate's shape")
    before, after = _head(predicate, "before"), _head(predicate, "after")
    if after[0] <= before[0]:
        raise CertificateError("chain.after does not come after chain.before")
    if predicate["sanitization"].get("category") not in ("Clear", "Purge"):
        raise CertificateError("sanitization.category is neither Clear nor Purge")
    _check_outcome(predicate)
    return statement


def signer(envelope: dict[str, Any], keys: Sequence[PublicKeyRef]) -> str:
    """The keyid of the key, among ``keys``, whose signature decided a certificate that
    ``check_certificate`` accepted: the first signature by one of them."""
    given = {key.keyid for key in keys}
    return next(
        str(entry["keyid"])
        for entry in envelope["signatures"]
        if isinstance(entry, dict) and entry.get("keyid") in given
    )


def _check_outcome(predicate: dict[str, Any]) -> None:
    """``complete`` only with a clean scan and every store verified (never a false complete)."""
    outcome = predicate["outcome"]
    if outcome not in ("complete", "partial"):
        raise CertificateError("outcome is neither complete nor partial")
    scan = predicate["verification"].get("byteScan", {})
    files = scan.get("files", []) if isinstance(scan, dict) else None
    stores = predicate["stores"].get("stores", [])
    if not isinstance(files, list) or not isinstance(stores, list):
        raise CertificateError("verification.byteScan or stores: not of the certificate's shape")
    if not all(isinstance(x, dict) for x in [*files, *stores]):
        raise CertificateError("a scanned file or a store is not an object")
    verification = predicate["verification"]
    dirty = bool(
        scan.get("hits") or verification.get("keysNotFound") or verification.get("residue")
    ) or any("error" in f for f in files)
    if outcome == "complete" and (
        dirty or any(s.get("verification") != "verified" for s in stores)
    ):
        raise CertificateError("outcome is complete, but the scan or a store says otherwise")
    if outcome == "partial" and not predicate["incomplete"]:
        raise CertificateError("outcome is partial but names nothing incomplete")


def _watch(
    lines: Iterable[str | bytes],
    seen: dict[int, Any],
    at: set[int],
    fact_id: str,
    doubled: set[int],
) -> Iterator[str | bytes]:
    """Pass the stored events through to the chain verifier, keeping only what the certificate
    needs: the first event, the events at the positions ``at``, and the fact's assert; the
    position of each of them with a key twice in one of its objects goes in ``doubled``."""
    needle = json.dumps(fact_id).encode("utf-8")
    twice: list[bool] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        made = dict(items)
        if len(made) != len(items):
            twice.append(True)
        return made

    for n, line in enumerate(lines, 1):
        yield line
        raw = line.encode("utf-8") if isinstance(line, str) else line
        if n == 1 or n in at or needle in raw:
            twice.clear()
            try:
                seen[n] = json.loads(line, object_pairs_hook=pairs)
            except (ValueError, RecursionError):
                seen[n] = None
            if twice:
                doubled.add(n)


def _single(doubled: set[int], n: int) -> None:
    """Event ``n`` is read by the certificate check: with a key twice, the chain verifier reads
    the last of the two (a forget keeps the leaf as it was) while a reader taking the first
    reads, say, a value the ledger still holds."""
    if n in doubled:
        raise CertificateError(f"event {n} has a key twice: readers disagree on it")


def check_against(statement: dict[str, Any], lines: Iterable[str | bytes]) -> None:
    """Check the certificate against the ledger's stored events (in append order)."""
    predicate = statement["predicate"]
    fact_id = statement["subject"][0]["name"]
    digest = statement["subject"][0]["digest"]
    events: dict[int, Any] = {}
    doubled: set[int] = set()
    at = {_head(predicate, "before")[0], _head(predicate, "after")[0]}
    report = verify_lines(_watch(lines, events, at, fact_id, doubled))
    if not report.ok and report.first is not None:
        first = report.first
        raise CertificateError(f"the ledger's chain fails at event {first.seq}: {first.reason}")
    for n in sorted({1, *at} & set(events)):
        _single(doubled, n)
    first_event = events.get(1)
    origin = ORIGIN_PREFIX + str(first_event.get("eventId") if first_event else "-")
    if predicate["media"].get("ledgerId") != origin:
        raise CertificateError(f"the ledger is {origin}, not the certificate's ledger")
    for which in ("before", "after"):
        size, head = _head(predicate, which)
        if size == 0 and head == "0" * 64:
            continue
        stored = (events.get(size) or {}).get("chain") if size in events else None
        if not isinstance(stored, dict) or stored.get("head") != head:
            raise CertificateError(
                f"the chain head {which} the forget (event {size}) is not in this ledger's chain"
            )
    _check_forgotten(events, fact_id, digest, predicate, doubled)


def _check_forgotten(
    events: dict[int, Any],
    fact_id: str,
    digest: dict[str, Any],
    predicate: dict[str, Any],
    doubled: set[int],
) -> None:
    size, _ = _head(predicate, "after")
    forget = events.get(size) or {}
    if forget.get("kind") != "forget" or forget.get("factId") != fact_id:
        raise CertificateError(f"event {size} is not the forget of fact {fact_id}")
    if forget.get("eventId") != predicate["request"].get("forgetEventId"):
        raise CertificateError("the forget event's id is not the certificate's")
    kind, value = forget.get("digestKind"), forget.get("valueDigest")
    if value is not None and digest != {kind: value}:
        raise CertificateError("the forget event's digest is not the subject's digest")
    found = False
    for n, event in events.items():  # every assert of the fact: one holding its value is enough
        fact = event.get("fact") if isinstance(event, dict) else None
        if (
            event
            and event.get("kind") == "assert"
            and isinstance(fact, dict)
            and fact.get("factId") == fact_id
        ):
            _single(doubled, n)
            commitment = fact.get("valueCommitment")
            kept = {"valueCommitment": commitment} if isinstance(commitment, str) else {}
            if value is None and digest != kept:  # no digest kept: the subject is the commitment
                raise CertificateError("the fact's value commitment is not the subject's digest")
            forgotten = fact.get("forgotten")
            if fact.get("value") is not None or not isinstance(forgotten, dict):
                raise CertificateError(f"fact {fact_id} is not forgotten in this ledger")
            if (forgotten.get("digestKind"), forgotten.get("valueDigest")) != (kind, value):
                raise CertificateError(f"fact {fact_id} is forgotten with another digest")
            found = True
    if not found:
        raise CertificateError(f"fact {fact_id} is not in this ledger")

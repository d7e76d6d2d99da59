"""Erasure certificates: what a forget did, as a signed in-toto statement (``docs/proofs.md``).

A certificate is a DSSE envelope (``signing.dsse_sign``, the Ed25519 key that signs results and
checkpoints) over an in-toto Statement v1 whose subject is the fact (its id, and its
``valueDigest`` as the digest) and whose predicate, of type ``PREDICATE_TYPE``, maps the fields
of the NIST SP 800-88 Rev. 1 Appendix G "Certificate of Sanitization" to a ledger: the media (the
ledger: backend, id, location, space), the confidentiality, the category (Clear for overwrite and
vacuum, Purge for crypto-shred) and method, the tool, the verification (a byte scan of the
ledger's own files, ``bytescan``) and its result, the destination, the sanitiser and the
verifier; then the request, the legal holds checked, the chain head before and after the
forget, the residual windows (where the value may still exist, and until when) and the stores.

This module builds the ledger's part (``draft``) and signs (``sign``); the write-through
stores' part is added by ``stores.certificate``, which the ledger layer may not import, through
``with_stores``. The outcome is ``complete`` only when the byte scan found nothing and every
store verified its removal; otherwise ``partial``, naming what is missing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_custody_state.ledger.bytescan import ScanResult
from agent_custody_state.ledger.chain import ChainHead
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.files import real_file
from agent_custody_state.ledger.model import AssertEvent, ForgetEvent
from agent_custody_state.ledger.residual import residual_windows
from agent_custody_state.version import __version__

if TYPE_CHECKING:  # ``cryptography`` is imported when a certificate is made, not at start-up
    from agent_custody_state.keys import KeyPair
    from agent_custody_state.ledger.backend import EventBackend

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"

PREDICATE_TYPE = "https://agent-custody.dev/erasure-certificate/v0.1"
TOOL = "agent-custody-state"

_METHODS = {
    "plain": (
        "Clear",
        "overwrite-and-vacuum",
        "the assert is rewritten in place with value null and its salt erased, in one atomic "
        "step with the forget event; the backend then reclaims the old bytes (JSONL: file "
        "rewrite and rename; SQLite: secure_delete and WAL truncation; PostgreSQL: VACUUM FULL)",
    ),
    "crypto-shred": (
        "Purge",
        "crypto-shred",
        "the value was only ever stored encrypted (AES-256-GCM) under a key of its own; the key "
        "is destroyed in the key store, so every copy of the events, backups and WAL included, "
        "holds ciphertext nothing can open. The key's own traces: key-store backups taken before "
        "the forget, until they expire; the key store's own storage (the file-system blocks of "
        "a file key store's rollback journal, unlinked at each commit; a PostgreSQL key "
        "server's WAL, its archives and replicas, the freed blocks of the key table's old "
        "relation files, and the dead row versions of its planner statistics of the key column, "
        "pg_statistic, which the forget clears), until reused, retired or vacuumed",
    ),
}


@dataclass(frozen=True)
class Party:
    """A sanitiser or verifier: a name and a role (NIST: name, title)."""

    name: str
    role: str


@dataclass(frozen=True)
class CertificateOptions:
    """How to certify a forget. ``key``: the Ed25519 private key that signs (a ``KeyPair``, a
    key object, a PKCS8 PEM path or bytes; None: the ledger's ``checkpoint_key``). The rest
    fills the NIST fields a ledger cannot know by itself."""

    key: Any = None
    confidentiality: str = "not categorised"
    destination: str = "internal reuse: the ledger stays in service, the fact's value erased"
    sanitizer: Party | None = None
    verifier: Party | None = None


def options_of(certificate: object, name: str = "certificate") -> CertificateOptions | None:
    """``True`` is the default options, ``False``/None no certificate; anything else is refused
    (``LedgerError`` naming the parameter ``name``): it was taken for its truth, so
    ``certificate="no"`` asked for a certificate."""
    if isinstance(certificate, CertificateOptions):
        return certificate
    if certificate is None or isinstance(certificate, bool):
        return CertificateOptions() if certificate else None
    raise LedgerError(
        f"{name} must be True, False or a CertificateOptions; got {certificate!r:.40}",
        field=name,
    )


def signing_key(options: CertificateOptions, fallback: Any) -> KeyPair:
    """The key to sign with: the options', else ``fallback`` (the ledger's); ``ValueError``
    (a one-line reason) when there is none or it cannot be read."""
    from agent_custody_state.keys import load_key_pair

    key = options.key if options.key is not None else fallback
    if key is None:
        raise ValueError(
            "an erasure certificate is signed, and there is no key: open the ledger with "
            "checkpoint_key= or pass CertificateOptions(key=...)"
        )
    return load_key_pair(key)


@dataclass(frozen=True)
class Forgetting:
    """What the ledger saw while it forgot one fact: the assert (with its value, before the
    erasure), the forget event, the chain before and after, how the value was stored
    (``stored``: ``"crypto-shred"`` when sealed under a data key, else ``"plain"``, whatever the
    ledger's mode: the certificate's method and residual windows follow it), the data keys
    it destroyed (for the byte scan only: ``_certify`` drops them once it has scanned), and how
    many of the value's keys the key store did not hold (``keys_not_found``: a key store other
    than this ledger's may hold them, so their destruction is not verified)."""

    assert_event: AssertEvent
    event: ForgetEvent
    before: ChainHead
    after: ChainHead
    stored: str = "plain"
    keys: tuple[bytes, ...] = field(default=(), repr=False)
    keys_not_found: int = 0


def _head(head: ChainHead) -> dict[str, Any]:
    return {"size": head.seq, "head": head.hash}


def draft(
    done: Forgetting,
    *,
    backend: str,
    ledger_id: str,
    location: str,
    forget_mode: str,
    scan: ScanResult | None,
    options: CertificateOptions,
    now: str,
    residue: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """The predicate of the ledger's part (no stores section yet: ``with_stores``).
    ``residue``: the residual windows the backend's compaction told it left (a copy of a
    value stored as it is that it knows remains: the verification fails, naming it)."""
    fact, event = done.assert_event.fact, done.event
    # The method is how this value was stored, not the ledger's mode: a value written before
    # the ledger took crypto-shred mode (or by the original) was stored as it is.
    category, method, details = _METHODS[done.stored]
    if done.stored != forget_mode:
        details += (
            "; this value was written before the ledger took crypto-shred mode (or by the "
            "original), so it was stored unencrypted and was erased by overwriting"
        )
    verification: dict[str, Any] = {
        "method": "byte scan of the ledger's own files for the value; removal checks of "
        "each write-through store",
        "result": "",  # set by finish()
    }
    if done.keys_not_found:
        verification["keysNotFound"] = done.keys_not_found
        details += (
            f"; {done.keys_not_found} of the value's data keys were not in this ledger's key "
            "store (another key store may hold them), so their destruction is not verified"
        )
    windows = residual_windows(backend, done.stored)
    left = [w for w in residue or [] if done.stored == "plain"]  # else ciphertext only
    if left:
        verification["residue"] = [w["where"] for w in left]
        windows += [w for w in left if w not in windows]
    scan_part: dict[str, Any] = (
        scan.to_dict() if scan is not None else {"scanned": False, "why": "not scannable"}
    )
    if scan is None:
        scan_part["why"] = f"the {backend} backend names no local files (EventBackend.local_files)"
    sanitizer = options.sanitizer or Party(TOOL, "sanitiser (automated), at the request below")
    verifier = options.verifier or Party(TOOL, "verifier (automated byte scan, store checks)")
    return {
        "media": {
            "type": "ledger",
            "backend": backend,
            "ledgerId": ledger_id,
            "location": location,
            "space": fact.space,
        },
        "confidentiality": {
            "preSanitization": options.confidentiality,
            "postSanitization": "the value is erased; its digest remains",
        },
        "sanitization": {"category": category, "method": method, "details": details},
        "tool": {"name": TOOL, "version": __version__},
        "verification": {**verification, "byteScan": scan_part},
        "destination": options.destination,
        "sanitizer": {"name": sanitizer.name, "role": sanitizer.role, "date": event.tx_time},
        "verifier": {"name": verifier.name, "role": verifier.role, "date": now},
        "request": {
            "actor": event.actor,
            "reason": event.reason,
            "receiptId": event.source.receipt_id,
            "forgetEventId": event.event_id,
            "txTime": event.tx_time,
        },
        "fact": {"factId": fact.fact_id, "digestKind": event.digest_kind},
        "legalHolds": {"checked": True, "onHold": False, "at": event.tx_time},
        "chain": {"before": _head(done.before), "after": _head(done.after)},
        "residualWindows": windows,
        "stores": {"covered": False, "stores": []},
    }


def with_stores(
    predicate: dict[str, Any],
    stores: list[dict[str, Any]],
    now: str,
    windows: Sequence[dict[str, str]] = (),
) -> dict[str, Any]:
    """The predicate with its stores section: one entry per store that held the fact, each
    ``{name, acknowledged, verification, error?}`` (``stores.certificate`` builds them), the
    stores' residual windows (``windows``, each naming its ``store``) after the ledger's, and
    the verifier's date moved to ``now``, after the stores were checked."""
    verifier = {**predicate["verifier"], "date": now}
    residual = [*predicate["residualWindows"], *(dict(w) for w in windows)]
    return {
        **predicate,
        "verifier": verifier,
        "residualWindows": residual,
        "stores": {"covered": True, "stores": stores},
    }


def finish(predicate: dict[str, Any]) -> dict[str, Any]:
    """Set the verification result and the outcome from the scan and the stores."""
    missing: list[str] = []
    scan = predicate["verification"]["byteScan"]
    if scan.get("hits"):
        missing.append(f"ledger files: {scan['hits']} hit(s) of the value")
    if any("error" in f for f in scan.get("files", [])):
        missing.append("ledger files: some could not be read")
    if predicate["verification"].get("keysNotFound"):
        count = predicate["verification"]["keysNotFound"]
        missing.append(f"key store: {count} data key(s) of the value not in it, not verified")
    for where in predicate["verification"].get("residue", []):
        missing.append(f"ledger files: the backend left a copy of the value ({where})")
    found = bool(missing)  # something was found left (or unreadable)
    for store in predicate["stores"]["stores"]:
        if store.get("verification") != "verified":
            found = found or store.get("verification") != "unknown"
            missing.append(f"store {store['name']}: {store.get('verification')}")
    result = "passed" if not missing else "failed"
    if result == "passed" and scan.get("scanned") is False and not predicate["stores"]["stores"]:
        result = "not verified"
    # A certificate issued after a stop (``stores.intents``): nothing could be checked again.
    not_repeated = predicate["verification"].get("notRepeated")
    if not_repeated:
        missing.insert(0, f"ledger files: {not_repeated}")
        result = "failed" if found else "not verified"
    verification = {**predicate["verification"], "result": result}
    outcome = {"outcome": "complete" if not missing else "partial", "incomplete": missing}
    return {**predicate, "verification": verification, **outcome}


def statement(predicate: dict[str, Any], fact_id: str, digest: dict[str, str]) -> dict[str, Any]:
    """The in-toto Statement v1 of a certificate: the fact is its subject."""
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": fact_id, "digest": digest}],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


def subject_digest(event: ForgetEvent, assert_event: AssertEvent) -> dict[str, str]:
    """The digest set of the subject: the forget's ``valueDigest`` under its kind; with no
    digest kept, the value's salted commitment (``valueCommitment``), which reveals nothing."""
    if event.value_digest is not None:
        return {event.digest_kind: event.value_digest}
    commitment = assert_event.fact.extra.get("valueCommitment")
    return {"valueCommitment": commitment} if isinstance(commitment, str) else {}


def sign(predicate: dict[str, Any], done: Forgetting, key: KeyPair) -> dict[str, Any]:
    """The DSSE envelope of the finished predicate."""
    from agent_custody_state.signing import IN_TOTO_TYPE, dsse_sign

    subject = subject_digest(done.event, done.assert_event)
    body = statement(finish(predicate), done.event.fact_id, subject)
    return dsse_sign(IN_TOTO_TYPE, body, key)


@dataclass(frozen=True)
class CertifiedForget:
    """``Ledger.forget(..., certificate=...)``: the forget event, its signed certificate, and
    what built it (``stores.certificate`` adds the stores and signs again)."""

    event: ForgetEvent
    certificate: dict[str, Any]
    forgetting: Forgetting
    predicate: dict[str, Any]
    key: KeyPair


def media_location(backend: EventBackend) -> str:
    """Where the certificate says the ledger is: a file ledger by the file's own name (every
    symlink resolved, ``files.real_file``: the spelling that opened it may be a link), any other
    by its location."""
    path = getattr(getattr(backend, "inner", backend), "path", None)
    return str(real_file(path)) if isinstance(path, os.PathLike | str) else backend.location

"""The envelope: what a value becomes on disk in crypto-shred mode.

A fact's value is replaced by a JSON object the TypeScript original (and any JSON reader) takes
for an ordinary, opaque value::

    {"shred": "A256GCM", "kid": "<32 hex>", "iv": "<base64, 12 bytes>", "ct": "<base64>"}

``ct`` is AES-256-GCM over the value's wire JSON (the exact text a plain-mode line would hold,
so a value reads back exactly as in plain mode), with the 16-byte tag appended; the additional
authenticated data binds it to the fact id, so a ciphertext copied onto another fact does not
open. ``kid`` names the key in the key store. Nothing about the value is stored in the clear
but its length, which the ciphertext shows.
"""

from __future__ import annotations

import binascii
import os
from typing import TYPE_CHECKING, Any

from agent_custody_state import fastjson
from agent_custody_state.canonical import js_json
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.model import AssertEvent, Fact

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM


_AESGCM: type[AESGCM] | None = None


def _aesgcm(key: bytes) -> AESGCM:
    """AES-GCM, imported on first use: a plain-mode process (and ``--help``) never loads the
    ``cryptography`` bindings."""
    global _AESGCM
    if _AESGCM is None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        _AESGCM = AESGCM
    return _AESGCM(key)


ALGORITHM = "A256GCM"
NONCE_BYTES = 12
_KEYS = frozenset(("shred", "kid", "iv", "ct"))
_AAD_PREFIX = b"agent-custody-state/shred/v1\x00"


def kid_of(value: Any) -> str | None:
    """The key id of an envelope, or None when ``value`` is not one."""
    if type(value) is not dict or value.keys() != _KEYS or value["shred"] != ALGORITHM:
        return None
    kid = value["kid"]
    return kid if isinstance(kid, str) else None


def _aad(fact_id: str) -> bytes:
    return _AAD_PREFIX + fact_id.encode("utf-8", "surrogatepass")


def seal(
    value: Any,
    *,
    fact_id: str,
    kid: str,
    key: bytes,
    nonce: bytes | None = None,
    vouched: bool = False,
) -> dict[str, str]:
    """Encrypt ``value`` for ``fact_id`` with ``key`` (named ``kid``): the envelope. ``nonce``:
    12 random bytes (drawn here when not given; a batch draws them all at once). ``vouched``:
    ``fastjson.exact`` has passed the value already (``plainseal``), so orjson's bytes are
    used without walking it again."""
    nonce = nonce or os.urandom(NONCE_BYTES)
    plain = fastjson.ordered_unchecked(value) if vouched else fastjson.ordered_bytes(value)
    if plain is None:
        plain = js_json(value).encode("utf-8")
    sealed = _aesgcm(key).encrypt(nonce, plain, _aad(fact_id))
    return {
        "shred": ALGORITHM,
        "kid": kid,
        "iv": binascii.b2a_base64(nonce, newline=False).decode("ascii"),
        "ct": binascii.b2a_base64(sealed, newline=False).decode("ascii"),
    }


def unseal(envelope: dict[str, Any], *, fact_id: str, key: bytes) -> Any:
    """The value inside ``envelope``; ``LedgerError`` if it does not authenticate (altered, or
    the key belongs to another store)."""
    try:
        # ``base64.b64decode(validate=True)`` without its Python wrapper (the same checks).
        nonce = binascii.a2b_base64(envelope["iv"], strict_mode=True)
        sealed = binascii.a2b_base64(envelope["ct"], strict_mode=True)
        plain = _aesgcm(key).decrypt(nonce, sealed, _aad(fact_id))
    except Exception as exc:
        # cryptography's InvalidTag is recognised by name, so it need not be imported up front.
        expected = isinstance(exc, ValueError | TypeError | binascii.Error)
        if not expected and type(exc).__name__ != "InvalidTag":
            raise
        raise LedgerError(
            f"fact {fact_id}: its encrypted value does not authenticate with key "
            f"{envelope.get('kid')} (the event was altered, or the key store is not this "
            "ledger's)",
            code="bad_ciphertext",
        ) from None
    return fastjson.loads(plain)


def fact_with_value(fact: Fact, value: Any) -> Fact:
    """``fact`` with its value replaced (the constructor, positionally: ``replace`` costs more
    than the cipher on the path of every sealed or opened value)."""
    f = fact
    return Fact(
        *(f.fact_id, f.subject, f.predicate, value, f.space, f.actor, f.source, f.provenance),
        *(f.external, f.valid_from, f.valid_to, f.confidence, f.forgotten, f.extra),
    )


def with_value(event: AssertEvent, value: Any) -> AssertEvent:
    """``event`` with its fact's value replaced, and no line (one encoded with the old value
    would be stale)."""
    e = event
    return AssertEvent(e.event_id, e.tx_time, fact_with_value(e.fact, value), e.supersedes, e.extra)

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


def cipher_for(key: bytes) -> AESGCM:
    """AES-GCM set up with ``key``, imported on first use: a plain-mode process (and ``--help``)
    never loads the ``cryptography`` bindings."""
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


def plaintext(value: Any, *, vouched: bool = False) -> bytes:
    """What an envelope encrypts: ``value``'s wire JSON, UTF-8. ``vouched``: ``fastjson.exact``
    has passed the value already (``plainseal``), so orjson's bytes are used without walking
    it again."""
    plain = fastjson.ordered_unchecked(value) if vouched else fastjson.ordered_bytes(value)
    return js_json(value).encode("utf-8") if plain is None else plain


def seal(
    plain: bytes,
    *,
    fact_id: str,
    kid: str,
    key: bytes,
    nonce: bytes | None = None,
    cipher: AESGCM | None = None,
    iv: str | None = None,
) -> dict[str, str]:
    """Encrypt a value, whose ``plaintext`` is ``plain``, for ``fact_id`` with ``key`` (named
    ``kid``): the envelope. ``nonce``: 12 random bytes (drawn here when not given; the key pool
    draws them with the keys). ``cipher`` and ``iv``: ``cipher_for(key)`` and the nonce's
    base64, when prepared ahead (``keypool``)."""
    nonce = nonce or os.urandom(NONCE_BYTES)
    sealed = (cipher or cipher_for(key)).encrypt(nonce, plain, _aad(fact_id))
    return {
        "shred": ALGORITHM,
        "kid": kid,
        "iv": iv or binascii.b2a_base64(nonce, newline=False).decode("ascii"),
        "ct": binascii.b2a_base64(sealed, newline=False).decode("ascii"),
    }


_VALUE_KEY = '"value":'


def spliced_line(line: str, plain: bytes, box: dict[str, str]) -> str | None:
    """``line`` (an assert's stored line as ``plainseal`` writes it, its value's JSON
    ``plain``) with the envelope ``box`` in place of the value: the text a full encoding of the
    sealed event gives, without encoding it again; None when the value is not where the layout
    puts it.

    Before the fact's ``value`` key such a line holds only the event's and the fact's first
    keys and their string values, and ``"value":`` cannot occur inside a JSON string (the
    quote closing ``value`` would be escaped), so its first occurrence is the key; the value's
    text is checked there too. An envelope is four ASCII strings that JSON writes unescaped
    (its key id is checked to be letters and digits; base64 has none of ``"`` and ``\\``)."""
    kid = box["kid"]
    start = line.find(_VALUE_KEY)
    if start < 0 or not (kid.isascii() and kid.isalnum()):
        return None
    start += len(_VALUE_KEY)
    text = plain.decode("utf-8")
    end = start + len(text)
    if not line.startswith(text, start) or line[end : end + 1] not in (",", "}"):
        return None
    envelope = f'{{"shred":"{box["shred"]}","kid":"{kid}","iv":"{box["iv"]}","ct":"{box["ct"]}"}}'
    return line[:start] + envelope + line[end:]


def unseal(envelope: dict[str, Any], *, fact_id: str, key: bytes) -> Any:
    """The value inside ``envelope``; ``LedgerError`` if it does not authenticate (altered, or
    the key belongs to another store)."""
    try:
        # ``base64.b64decode(validate=True)`` without its Python wrapper (the same checks).
        nonce = binascii.a2b_base64(envelope["iv"], strict_mode=True)
        sealed = binascii.a2b_base64(envelope["ct"], strict_mode=True)
        plain = cipher_for(key).decrypt(nonce, sealed, _aad(fact_id))
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

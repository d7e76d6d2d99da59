"""A stored event's hashes as ``verify`` reads them: the event parsed strictly, a hash taken
only as the chain writes it, the head it records, and the leaf hash of its redacted form (fast
when orjson writes its canonical text, the canonical bytes otherwise).
"""

from __future__ import annotations

import hashlib
from typing import Any

from agent_custody_state import fastjson
from agent_custody_state.ledger.chain import CHAIN_KEY, leaf_bytes

#: ``json.loads`` for text or UTF-8 bytes (invalid UTF-8 raises ``UnicodeDecodeError``), without
#: ``NaN``/``Infinity``: an event the original cannot parse is not intact, whatever its hashes.
loads = fastjson.loads_strict


def hex32(value: Any) -> bytes | None:
    """A hash written as the chain writes it (64 lowercase hex digits), else None: another
    spelling of the same bytes is an edit too."""
    if isinstance(value, str) and len(value) == 64:
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            return None
        return raw if raw.hex() == value else None
    return None


def stored_head(text: str | bytes) -> bytes | None:
    """The head recorded on a stored event, if it has a well-formed one."""
    try:
        data = loads(text)
    except (ValueError, UnicodeDecodeError):
        return None
    record = data.get(CHAIN_KEY) if isinstance(data, dict) else None
    return hex32(record.get("head")) if isinstance(record, dict) else None


def leaf_hash(red: dict[str, Any], stored: Any) -> bytes:
    """The leaf hash of a redacted form, ``SHA-256(0x00 || canonical(red))``.

    First try: orjson's key-sorted bytes, without the checks that make them the canonical
    bytes in general (``chain.leaf_bytes``), compared with the leaf the event records. A match
    is as good as the canonical check: the recorded leaf hashes the canonical text of the event
    as written, and equal hashes mean orjson wrote that very text for the event read now, so
    both parse to the same JSON value (an edit that changes nothing a JSON reader sees, such as
    a number spelt ``1.0`` for ``1``, escapes the canonical check as well). No match (an edited
    event, or one whose canonical text orjson does not write: an odd number or key order) takes
    the canonical path, so no leaf is ever reported wrong that the canonical check accepts."""
    if type(stored) is str:
        fast = fastjson.sorted_unchecked(red)
        if fast is not None:
            leaf = hashlib.sha256(b"\x00" + fast).digest()
            if leaf.hex() == stored:
                return leaf
    return hashlib.sha256(b"\x00" + leaf_bytes(red)).digest()

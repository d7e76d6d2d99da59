"""Text every store can hold: U+0000 and lone surrogates escaped, reversibly.

The ledger accepts a value (and an actor or receipt id) whose strings hold U+0000 or a lone
surrogate: its JSON text escapes both. A store cannot take either as text: UTF-8 has no form
for a lone surrogate (every HTTP client and database driver fails on it), and PostgreSQL's
``text`` and ``jsonb`` refuse U+0000 (pgvector, LangGraph's PostgreSQL store, and the databases
behind mem0, Zep, Letta and Cognee). So such a string is sent as its JSON text: quoted, with
``\\u0000`` and ``\\udXXX`` escapes, as a value that is not a string already is
(``fact_text``). Every other string is sent as it is, byte for byte.

The escape is reversible (``original_text``): a string that would read as an escape (the JSON
text of a string that needed one) is itself escaped, so no two strings are sent alike. The
ledger stays the source of truth; the escape only lets a store hold, index and remove the copy.
"""

from __future__ import annotations

import json
import re

from agent_custody_state.canonical import js_json

__all__ = ["holdable_text", "original_text"]

_UNHOLDABLE = re.compile("[\x00\ud800-\udfff]")


def _reads_as_escape(text: str) -> bool:
    """Whether ``text`` is the JSON text of a string that ``holdable_text`` escapes."""
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        return False
    try:
        inner = json.loads(text)
    except ValueError:
        return False
    return isinstance(inner, str) and _needs_escape(inner)


def _needs_escape(text: str) -> bool:
    if ("\x00" in text or not text.isascii()) and _UNHOLDABLE.search(text):
        return True
    return text[:1] == '"' and _reads_as_escape(text)


def holdable_text(text: str) -> str:
    """``text`` as a store is sent it: unchanged, unless it holds U+0000 or a lone surrogate
    (or reads as such an escape), when it is sent as its JSON text."""
    return js_json(text) if _needs_escape(text) else text


def original_text(sent: str) -> str:
    """The string ``holdable_text`` was given, from what it returned."""
    if _reads_as_escape(sent):
        inner: str = json.loads(sent)
        return inner
    return sent

"""Gateway evidence: a written value must equal what the gateway itself fetched (SPEC 4.2).

``evidence: {fact, path?}`` names one of the facts the gateway looked up for this call (carried in
``_meta["agent-custody/observed"]``) and optionally a dotted path into it. Equality is by
canonical JSON: type-exact (``1`` is not ``"1"``, ``true`` is not ``1``), object key order ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_custody_state.canonical import canonical_equal
from agent_custody_state.server.trust import CallContext
from agent_custody_state.server.validation import ArgumentErrors

EVIDENCE_NEEDS_GATEWAY = (
    "evidence needs the gateway: only a fact the gateway fetched itself can verify a value"
)

_MISSING = object()


class EvidenceError(ValueError):
    """The write's evidence does not hold; the message is the SPEC text."""


def walk(value: Any, path: str | None) -> Any:
    """Follow ``a.b.0.c`` into a JSON value; ``_MISSING`` when a step does not exist.

    A step into an array is an index only in its canonical decimal form (``0``, ``10``; not
    ``01``), as the original's ``value[step]`` reads it. An array index is ASCII digits only: ``str.isdigit`` also takes ``²`` (which ``int``
    refuses) and ``١`` (which it reads as 1), so a step of other digits into an array is
    refused as an invalid argument rather than read as an index.
    """
    if not path:
        return value
    current = value
    for step in path.split("."):
        if isinstance(current, Mapping):
            if step not in current:
                return _MISSING
            current = current[step]
        elif isinstance(current, list) and step.isdigit():
            if not step.isascii():
                raise ArgumentErrors(
                    [f"evidence.path: {step!r} indexes an array: write the index in ASCII digits"]
                )
            index = int(step)
            if step != str(index) or index >= len(current):
                # As JavaScript's ``array[step]``: "01" is a property name, not an index.
                return _MISSING
            current = current[index]
        else:
            return _MISSING
    return current


def check_evidence(call: CallContext, evidence: Mapping[str, Any], value: Any) -> None:
    """Raise ``EvidenceError`` unless ``value`` equals the observed fact at ``path``."""
    if call.provenance != "attested":
        raise EvidenceError(EVIDENCE_NEEDS_GATEWAY)
    name = evidence["fact"]
    path = evidence.get("path") or None
    observed = call.observed or {}
    if name not in observed:
        raise EvidenceError(
            f'no fact named "{name}" was fetched by the gateway for this call; configure a fact '
            "lookup for memory.write"
        )
    expected = walk(observed[name], path)
    if expected is _MISSING or not canonical_equal(expected, value):
        where = f"{name}.{path}" if path else name
        raise EvidenceError(
            f'value differs from what the gateway observed in "{where}"; write refused'
        )

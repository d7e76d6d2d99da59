"""Two of a fact's arguments checked apart from ``arguments`` (which is at its size limit):
``provenance`` and ``confidence``, each kept as the plain value JSON reads back.

A caller's ``str`` subclass (``class Provenance(str, Enum)``) or ``float`` subclass (NumPy's
``float64``) was kept as given: the writing process read ``Provenance.CLAIMED`` where every
other process read ``"claimed"``. A ``Decimal`` or ``Fraction`` confidence was refused as "must
be between 0 and 1" although it was; it is now told to be an int or float (a JSON value keeps
SPEC 2.1's text). See docs/decisions.md, "Arguments a user gets wrong".
"""

from __future__ import annotations

from numbers import Number

from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.model import PROVENANCE_RANK

#: SPEC 2.1's refusal, the server's tool error too.
SPEC_RANGE = "confidence must be between 0 and 1"


def provenance_arg(provenance: object) -> str:
    """One of ``claimed``, ``attested``, ``verified``, as plain text."""
    if not isinstance(provenance, str) or provenance not in PROVENANCE_RANK:
        raise LedgerError(
            "provenance must be one of claimed, attested, verified", field="provenance"
        )
    return str.__str__(provenance)


def confidence_arg(confidence: object) -> int | float | None:
    """None, or a number from 0 to 1 (an ``int`` or ``float``; not a bool), as plain."""
    if confidence is None:
        return None
    if (type(confidence) is float or type(confidence) is int) and 0 <= confidence <= 1:
        return confidence  # the usual case, before the checks below
    if isinstance(confidence, Number) and not isinstance(confidence, bool | int | float):
        raise LedgerError(  # a number no JSON parser gives: the server never sends one
            f"confidence must be between 0 and 1, as an int or float, not a "
            f"{type(confidence).__name__}",
            field="confidence",
        )
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, int | float)
        or not 0 <= confidence <= 1
    ):
        raise LedgerError(SPEC_RANGE, field="confidence")  # SPEC 2.1's text, as on the wire
    return int.__int__(confidence) if isinstance(confidence, int) else float.__float__(confidence)

"""Typed requests: what a caller asks the ledger to assert, before it is validated and stamped.

The MCP server, the write-through flows and bulk ingest hand the ledger ``AssertRequest``
objects rather than loose keyword dictionaries, so a misspelt field fails where it is written.
``Ledger.assert_fact(**kwargs)`` builds one from its keyword arguments (SPEC section 7).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.frozen import frozen_init

TimeLike = datetime | str


@frozen_init  # built once per item of every batch: the faster constructor (``frozen``)
@dataclass(frozen=True, slots=True)
class AssertRequest:
    """The arguments of ``assert_fact`` (SPEC section 7), unvalidated.

    ``fact_id`` and ``valid_from`` may be left out: the ledger draws a fresh id and uses the
    transaction time. The transaction time itself is never a request field: only the ledger's
    clock stamps it.
    """

    subject: str
    predicate: str
    value: Any
    space: str
    actor: str
    receipt_id: str | None = None
    provenance: str = "claimed"
    external: Mapping[str, str] | None = None
    valid_from: TimeLike | None = None
    confidence: float | None = None
    supersedes: str | None = None
    fact_id: str | None = None
    #: Keys kept on the fact beside the wire keys (SPEC 1.2 keeps unknown keys): the stores'
    #: ``externalWhere``. Set by code only: a mapping handed to ``of`` cannot carry it.
    fact_extra: Mapping[str, Any] | None = None

    def with_(self, **changes: Any) -> AssertRequest:
        """A copy with some fields replaced."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def of(cls, item: AssertRequest | Mapping[str, Any]) -> AssertRequest:
        """Accept a request or a mapping of ``assert_fact`` keyword arguments."""
        if isinstance(item, AssertRequest):
            return item
        if not isinstance(item, Mapping):
            raise LedgerError(
                f"a fact must be a mapping of assert_fact's arguments, not {type(item).__name__}"
            )
        unknown = sorted(set(item) - _FIELDS)
        if unknown:
            raise LedgerError(f"unknown argument {unknown[0]!r}", field=str(unknown[0]))
        missing = [name for name in _REQUIRED if name not in item]
        if missing:
            raise LedgerError(f"{missing[0]} is required", field=missing[0])
        return cls(**item)


_FIELDS = frozenset(f.name for f in dataclasses.fields(AssertRequest)) - {"fact_extra"}
_REQUIRED = tuple(
    f.name
    for f in dataclasses.fields(AssertRequest)
    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
)

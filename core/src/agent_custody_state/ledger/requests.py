"""Typed requests: what a caller asks the ledger to assert, before it is validated and stamped.

The MCP server, the write-through flows and bulk ingest hand the ledger ``AssertRequest``
objects rather than loose keyword dictionaries, so a misspelt field fails where it is written.
``Ledger.assert_fact(**kwargs)`` builds one from its keyword arguments (SPEC section 7;
``requested``): a misspelt or missing one is a ``TypeError`` naming the method the caller
called, with the closest field suggested (``receipt`` -> ``receipt_id``), not one naming
``AssertRequest.__init__``.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Iterable, Mapping
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
        unknown = set(item) - _FIELDS  # every key that is not text among them
        if unknown:
            odd = [type(k).__name__ for k in unknown if not isinstance(k, str)]
            if odd:  # sorting them with text failed, and so did a key whose ``str`` raises
                raise LedgerError(f"argument names must be text, not {odd[0]}")
            name = str.__str__(sorted(unknown)[0])
            raise LedgerError(f"unknown argument {name!r}{did_you_mean(name, _FIELDS)}", field=name)
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
_ALL_FIELDS = _FIELDS | {"fact_extra"}


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the choice closest to a misspelt ``name``, or ``""``. A
    wire name in camelCase (``receiptId``, SPEC 1.1) finds its snake_case parameter."""
    known = sorted(choices)
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()
    if snake != name and snake in known:
        return f" (did you mean {snake!r}?)"
    close = difflib.get_close_matches(name, known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def requested(
    method: str, request: object, kwargs: Mapping[str, Any], *params: str
) -> AssertRequest:
    """The request ``method`` (``assert_fact``, ``validate_assert``) was called with: the
    ``AssertRequest`` given, or one built from the keyword arguments. A mistake raises
    ``TypeError`` (what Python raises for a bad call) naming ``method``: an unknown keyword
    (with the closest field or of ``params``, ``method``'s own keywords, suggested: a misspelt
    ``precondition`` is not a request field), a missing one, a request and keywords both (the
    keywords were ignored), or a request of another type (a mapping: ``**item``)."""
    if request is not None:
        if kwargs:
            raise TypeError(
                _unexpected(method, kwargs, params)
                or f"{method}() takes an AssertRequest or keyword arguments, not both "
                f"(got {', '.join(map(repr, kwargs))} beside the request; use request.with_())"
            )
        return request_arg(method, request, " or keyword arguments")
    try:
        return AssertRequest(**kwargs)
    except TypeError as exc:
        raise TypeError(_call_mistake(method, kwargs, params) or str(exc)) from None


def request_arg(method: str, request: object, alternative: str = "") -> AssertRequest:
    """``request`` if it is an ``AssertRequest``; else a ``TypeError`` naming ``method`` (a
    mapping of arguments was passed where ``AssertRequest.of(item)`` was meant, say)."""
    if isinstance(request, AssertRequest):
        return request
    hint = f" (pass {'**item, or ' if alternative else ''}AssertRequest.of(item))"
    hint = hint if isinstance(request, Mapping) else ""
    raise TypeError(
        f"{method}() takes an AssertRequest{alternative}, not a {type(request).__name__}{hint}"
    )


def _unexpected(method: str, kwargs: Mapping[str, Any], params: tuple[str, ...]) -> str | None:
    """Python's message for the first keyword ``method`` does not take, with a suggestion."""
    for name in kwargs:
        if name not in _ALL_FIELDS:
            return (
                f"{method}() got an unexpected keyword argument {name!r}"
                f"{did_you_mean(name, _ALL_FIELDS | set(params))}"
            )
    return None


def _call_mistake(method: str, kwargs: Mapping[str, Any], params: tuple[str, ...]) -> str | None:
    """Python's message for a bad call of ``method(**kwargs)``, with a suggestion."""
    if (unexpected := _unexpected(method, kwargs, params)) is not None:
        return unexpected
    missing = [repr(name) for name in _REQUIRED if name not in kwargs]
    if not missing:
        return None
    listed = missing[0] if len(missing) == 1 else ", ".join(missing[:-1]) + f" and {missing[-1]}"
    plural = "argument" if len(missing) == 1 else "arguments"
    return f"{method}() missing {len(missing)} required keyword {plural}: {listed}"

"""``completion/complete``: subjects, predicates, spaces and fact ids from the ledger's indexes.

What is completed:

- the resource templates' arguments: ``factId`` of ``memory://fact/{factId}`` and ``subject`` of
  ``memory://subject/{subject}``;
- the ``subject``, ``predicate`` and ``space`` arguments of a tool. MCP's completion request
  names a prompt or a resource template, never a tool, so a ``ref/prompt`` whose name is one of
  our tools (``memory.read``, ...) stands for that tool; the server has no prompts of its own.

Any other reference or argument is answered with no values (not an error: a client may ask
about anything it shows). Values are the ones starting with the typed prefix, in code-point
order, at most 100; ``hasMore`` says when there are more, and ``total`` is given when the list
is complete. They come from ``EventBackend.key_values`` (an index, not a scan), on the ledger
thread.

Who sees what: a forgotten fact's keys are never offered (a subject may itself be personal
data; the forget erased it from everything a caller reads). Quarantined (claimed) facts are
offered: every caller who may read may also ask ``memory.read`` for them (``includeClaimed``).
A token limited to spaces is offered only keys of facts in its spaces (nothing else it could not
read leaks through a completion); that answer reads the asserts of those spaces, not the index,
so it costs in proportion to the facts the token may see.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import mcp_types as types

from agent_custody_state.ledger.backend import KeyName, key_of
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.server.resources import FACT_PREFIX, SUBJECT_PREFIX
from agent_custody_state.spaces import SpaceScope

MAX_VALUES = 100  # the spec's cap on one answer
#: The key each completable argument names, per reference kind.
TEMPLATE_ARGUMENTS: dict[tuple[str, str], KeyName] = {
    (FACT_PREFIX + "{factId}", "factId"): "factId",
    (SUBJECT_PREFIX + "{subject}", "subject"): "subject",
}
TOOL_ARGUMENTS: dict[str, KeyName] = {
    "subject": "subject",
    "predicate": "predicate",
    "space": "space",
}
_LONGEST_PREFIX = 1024  # keys are short; a longer "prefix" matches nothing worth a query


def key_for(
    params: types.CompleteRequestParams, tools: Collection[str], schemas: dict[str, Any]
) -> KeyName | None:
    """Which fact key the request completes, or None when it completes nothing of ours."""
    ref, name = params.ref, params.argument.name
    if isinstance(ref, types.ResourceTemplateReference):
        return TEMPLATE_ARGUMENTS.get((ref.uri, name))
    if ref.name in tools and name in schemas[ref.name].get("properties", {}):
        return TOOL_ARGUMENTS.get(name)
    return None


def complete(
    ledger: Ledger, key: KeyName | None, prefix: str, scope: SpaceScope | None = None
) -> types.CompleteResult:
    """Up to ``MAX_VALUES`` values of ``key`` starting with ``prefix`` (on the ledger thread),
    of facts in ``scope``'s spaces when the caller's token is limited to some."""
    if key is None or len(prefix) > _LONGEST_PREFIX:
        return types.CompleteResult(completion=types.Completion(values=[], total=0, has_more=False))
    if scope is None:
        values = ledger.key_values(key, prefix, MAX_VALUES + 1)
    else:
        values = _scoped_values(ledger, key, prefix, scope)
    more = len(values) > MAX_VALUES
    return types.CompleteResult(
        completion=types.Completion(
            values=values[:MAX_VALUES], total=None if more else len(values), has_more=more
        )
    )


def _scoped_values(ledger: Ledger, key: KeyName, prefix: str, scope: SpaceScope) -> list[str]:
    spaces = [s for s in ledger.key_values("space", "", 1 << 30) if scope.allows(s)]
    if key == "space":
        found = {s for s in spaces if s.startswith(prefix)}
    else:
        found = {
            value
            for space in spaces
            for event in ledger.backend.find_asserts(space=space)
            if event.fact.forgotten is None and (value := key_of(event, key)).startswith(prefix)
        }
    return sorted(found)[: MAX_VALUES + 1]

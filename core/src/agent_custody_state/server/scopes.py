"""Space scopes: which spaces a token may see and change (issue 13 section 3).

A token may be limited to spaces: exact names (``team:support``) or prefixes written with a
trailing ``*`` (``user:*`` matches every space starting with ``user:``; ``*`` alone matches
every space). ``None`` is an unscoped caller: everything, as before scopes existed.

What a scoped caller cannot see must not be told apart from what does not exist: a fact id in
another space answers exactly as an unknown id does (the ledger's own ``unknown_fact`` refusal,
an empty history, a missing resource). A *space* outside the scope is different: the caller
named it, and the refusal (``space_out_of_scope``) says only what its own token allows, nothing
about the ledger.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_custody_state.ledger.chain import public_event
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.model import AssertEvent, Event, Fact
from agent_custody_state.spaces import SpaceScope

__all__ = [
    "SpaceScope",
    "allows",
    "check_space",
    "scope_arg",
    "shown_events",
    "visible_events",
    "visible_facts",
]


def scope_arg(value: Any, what: str) -> SpaceScope | None:
    """``None`` (unscoped), a ``SpaceScope``, or a list of patterns to parse."""
    if value is None or isinstance(value, SpaceScope):
        return value
    return SpaceScope.parse(value, what=what)


def allows(scope: SpaceScope | None, space: str) -> bool:
    return scope is None or scope.allows(space)


def out_of_scope(space: str, scope: SpaceScope) -> LedgerError:
    return LedgerError(
        f"space {space} is outside this token's scope (it may use: {scope})",
        field="space",
        code="space_out_of_scope",
    )


def check_space(scope: SpaceScope | None, space: str) -> None:
    """Refuse a space the caller named outside its scope."""
    if scope is not None and not scope.allows(space):
        raise out_of_scope(space, scope)


def visible_facts(scope: SpaceScope | None, facts: Sequence[Fact]) -> list[Fact]:
    return list(facts) if scope is None else [f for f in facts if scope.allows(f.space)]


def visible_events(scope: SpaceScope | None, events: Sequence[Event]) -> list[Event]:
    """``events`` (a history or a timeline, which hold the assert of every fact they mention)
    less the asserts in spaces outside ``scope`` and every event about such a fact."""
    if scope is None:
        return list(events)
    seen = {e.fact_id for e in events if isinstance(e, AssertEvent) and scope.allows(e.fact.space)}
    return [e for e in events if getattr(e, "fact_id", None) in seen]


def shown_events(
    ledger: Ledger, scope: SpaceScope | None, events: Sequence[Event]
) -> list[dict[str, Any]]:
    """The events of a history or timeline a caller limited to ``scope`` sees, as JSON: an
    assert superseding a fact in another space shows as superseding none (its id would name a
    fact the caller cannot see; the reverse, a fact superseded from another space, shows as
    ended, not by what)."""
    shown = [public_event(event) for event in visible_events(scope, events)]
    if scope is not None:
        for data in shown:
            old_id = data.get("supersedes")
            old = ledger.get(old_id) if old_id else None
            if old_id and (old is None or not scope.allows(old.space)):
                data["supersedes"] = None
    return shown

"""Step-up authorization: which OAuth scopes a tool call lacks (MCP authorization, issue 13 §3).

The MCP authorization spec asks a resource server to answer a request whose access token lacks
a scope the operation needs with HTTP ``403`` and ``WWW-Authenticate: Bearer
error="insufficient_scope", scope="..."``, naming only the scopes *this operation* needs (the
client adds them to those it holds and asks the authorization server again). The guard asks
``missing_scopes`` before a ``tools/call`` from an OAuth token reaches the MCP layer. Two
refusals are scope questions, and answered so:

- a ``reader`` token calling a tool that changes memory: the scope of the least trusted grant
  whose role may call it (``memory:write``; ``memory:gateway`` for the gateway-only tools);
- a space-scoped token naming a space outside its scope (``memory.write``, ``memory.read`` or
  ``memory.sweep`` with ``space``): the space's scope (``space:team:b``). The caller named the
  space, so the answer tells it only about its own token.

Everything else stays a tool error, as for static tokens (which no authorization server can
widen): a fact id outside the scope answers as an unknown id (a 403 would leak that the fact
exists), a missing receipt is not a scope, a space no scope token can spell (RFC 6749's
``scope-token`` characters) cannot be asked for, and an unknown tool or malformed arguments get
the MCP layer's own answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent_custody_state.server.policy import GATEWAY_ONLY, READ_ONLY_TOOLS
from agent_custody_state.server.scopes import SpaceScope
from agent_custody_state.server.tools import TOOL_NAMES
from agent_custody_state.server.trust import Role

if TYPE_CHECKING:
    from agent_custody_state.server.oauth import OAuthSettings

#: Tools whose ``space`` argument the caller's space scope must allow.
SPACE_TOOLS = frozenset({"memory.write", "memory.read", "memory.sweep"})
_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")  # RFC 6749 section 3.3
_RANK: dict[Role, int] = {"reader": 1, "direct": 2, "gateway": 3}


@dataclass(frozen=True)
class Missing:
    """The scopes a call lacks, and why (for ``error_description`` and the JSON-RPC error)."""

    scopes: tuple[str, ...]
    reason: str


def tool_call(body: bytes) -> tuple[Any, str, Mapping[str, Any]] | None:
    """``(id, tool, arguments)`` of a JSON-RPC ``tools/call`` body, else None (anything else,
    malformed ones included, is left to the MCP layer)."""
    if b"tools/call" not in body:
        return None  # most requests: no parse
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):  # nested too deep: the MCP layer refuses it (400)
        return None
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return None
    params = message.get("params")
    if not isinstance(params, dict) or not isinstance(params.get("name"), str):
        return None
    arguments = params.get("arguments")
    return message.get("id"), params["name"], arguments if isinstance(arguments, dict) else {}


def missing_scopes(
    settings: OAuthSettings,
    role: Role,
    spaces: SpaceScope | None,
    tool: str,
    arguments: Mapping[str, Any],
) -> Missing | None:
    """What ``tool`` called with ``arguments`` needs that the token lacks, or None."""
    if tool not in TOOL_NAMES:
        return None
    scopes: list[str] = []
    reasons: list[str] = []
    if role == "reader" and tool not in READ_ONLY_TOOLS:
        needed: Role = "gateway" if tool in GATEWAY_ONLY else "direct"
        grant = _grant_for(settings, needed)
        if grant is not None:
            scopes.append(grant)
            reasons.append(f"{tool} changes memory: it needs the {grant} scope")
    space = arguments.get("space")
    if tool in SPACE_TOOLS and isinstance(space, str) and spaces and not spaces.allows(space):
        scope = settings.space_prefix + space
        if settings.space_prefix and _SCOPE_TOKEN.fullmatch(scope):
            scopes.append(scope)
            reasons.append(f"space {space} is outside this token's scope: it needs {scope}")
    if not scopes or len(reasons) < _refusals(role, tool, spaces, space):
        return None  # a refusal no scope can lift stays the tool's own answer
    return Missing(tuple(scopes), "; ".join(reasons))


def _refusals(role: Role, tool: str, spaces: SpaceScope | None, space: Any) -> int:
    """How many scope refusals the tool layer would make: all must be liftable to step up."""
    count = int(role == "reader" and tool not in READ_ONLY_TOOLS)
    in_space = tool in SPACE_TOOLS and isinstance(space, str)
    return count + int(in_space and spaces is not None and not spaces.allows(space))


def _grant_for(settings: OAuthSettings, role: Role) -> str | None:
    """The scope of the least trusted grant whose role is ``role`` or above; one without its
    own spaces first (it would narrow an unscoped token), then by name."""
    able = [(name, r, s) for name, (r, s) in settings.grants.items() if _RANK[r] >= _RANK[role]]
    if not able:
        return None
    best = min(able, key=lambda g: (_RANK[g[1]], g[2] is not None, g[0]))
    return best[0]

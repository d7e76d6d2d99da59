"""Who is calling, and what of its ``_meta`` to believe (SPEC 4.1).

The receipts gateway puts three keys in a call's ``_meta``: the receipt id, the agent of the signed
grant, and the facts it fetched for this call. Only a *gateway* may set them: over stdio the
process that spawned the server is the gateway; over HTTP a bearer token's role decides. A
direct caller's ``agent-custody/*`` keys are dropped before anything reads them, so its writes
are ``claimed`` and it can neither confirm a fact nor pass the gateway requirement, whatever it
sends.

Everything per call lives in one immutable ``CallContext`` handed down explicitly, so two
concurrent calls never share state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from agent_custody_state.server.scopes import SpaceScope
from agent_custody_state.server.validation import MAX_TEXT

Role = Literal["gateway", "direct", "reader"]
ROLES: tuple[Role, ...] = ("gateway", "direct", "reader")

RECEIPT_KEY = "agent-custody/receipt"
AGENT_KEY = "agent-custody/agent"
OBSERVED_KEY = "agent-custody/observed"
FACTS_KEY = "agent-custody/facts"
SIGNATURE_KEY = "agent-custody/upstream-signature"

#: Where the HTTP transport leaves the caller's role in the ASGI scope for the tool handler.
SCOPE_ROLE_KEY = "agent_custody.role"
#: ... and the caller's space scope (a ``SpaceScope``; absent for an unscoped caller).
SCOPE_SPACES_KEY = "agent_custody.spaces"

GATEWAY_REQUIRED = (
    "memory server accepts calls only through the receipts gateway; no receipt id on this call"
)
CONFIRM_NEEDS_GATEWAY = (
    "confirmation must come through the receipts gateway; a self-reported caller cannot lift a "
    "fact out of quarantine"
)


@dataclass(frozen=True, slots=True)
class CallContext:
    """What one call is believed to be: role, receipt, agent, and the gateway's observations."""

    role: Role
    receipt_id: str | None = None
    gateway_agent: str | None = None
    observed: Mapping[str, Any] | None = None
    spaces: SpaceScope | None = None  # None: every space (an unscoped caller)
    #: ``SweepProgress`` of a call that asked for progress (``progress.py``), else None
    progress: Callable[[str, int, int], None] | None = None

    @property
    def provenance(self) -> str:
        """``attested`` when the gateway named both a receipt and an agent, else ``claimed``."""
        return "attested" if self.receipt_id and self.gateway_agent else "claimed"

    def actor(self, argument: str | None = None) -> str:
        """The grant's agent; else the caller's own ``actor`` argument; else ``anonymous``."""
        if self.gateway_agent:
            return self.gateway_agent
        if argument:
            return argument
        return "anonymous"


def _text(value: Any) -> str | None:
    # A key that is not a non-empty string is treated as absent: a malformed receipt must not
    # count as one, and an empty agent must not attest. So is one longer than a text argument
    # may be (``MAX_TEXT``), or one no ledger can store (a lone surrogate): it would land in
    # every event the call writes.
    if not isinstance(value, str) or not value or len(value) > MAX_TEXT:
        return None
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return None
    return value


def call_context(
    meta: Mapping[str, Any] | None, role: Role, spaces: SpaceScope | None = None
) -> CallContext:
    """Build the context of one call from its ``_meta`` and the transport's verdict on the caller."""
    if role != "gateway" or not meta:
        return CallContext(role=role, spaces=spaces)
    observed = meta.get(OBSERVED_KEY)
    return CallContext(
        role=role,
        receipt_id=_text(meta.get(RECEIPT_KEY)),
        gateway_agent=_text(meta.get(AGENT_KEY)),
        observed=observed if isinstance(observed, Mapping) else None,
        spaces=spaces,
    )


def gateway_refusal(
    require_gateway: bool, meta: Mapping[str, Any] | None, role: Role
) -> str | None:
    """``GATEWAY_REQUIRED`` when a server that requires the gateway gets a request (a tool call,
    a resource read, a completion, a subscription) without a believed receipt id, else None."""
    if require_gateway and call_context(meta, role).receipt_id is None:
        return GATEWAY_REQUIRED
    return None


def role_of_request(request: Any, default: Role = "gateway") -> Role:
    """The caller's role as the transport recorded it.

    No HTTP request at all means a stream transport (stdio, in-process): the peer that owns the
    streams spawned the server, so it is the gateway (``default``). An HTTP request carries the
    role our guard put in its scope; one without it reached the server around the guard (someone
    mounted the app elsewhere) and is treated as direct.
    """
    if request is None:
        return default
    scope = getattr(request, "scope", None)
    role = scope.get(SCOPE_ROLE_KEY) if isinstance(scope, Mapping) else None
    return role if role in ROLES else "direct"


def spaces_of_request(request: Any, default: SpaceScope | None = None) -> SpaceScope | None:
    """The caller's space scope as the transport recorded it (``default`` for a stream
    transport: the server's own ``--spaces``). An HTTP request carries what the guard found
    for its token; None there is an unscoped token."""
    if request is None:
        return default
    scope = getattr(request, "scope", None)
    spaces = scope.get(SCOPE_SPACES_KEY) if isinstance(scope, Mapping) else None
    return spaces if isinstance(spaces, SpaceScope) else None

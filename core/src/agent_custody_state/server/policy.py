"""What a direct caller may do to memory (SPEC 4.1, "Direct callers"; issue 11 item 3).

A call is *direct* when no gateway vouches for it: no believed receipt id (a direct HTTP token,
a gateway token or stdio peer that sent no receipt ``_meta``, or the tokenless loopback server).
``--allow-direct`` admits such calls, but only into quarantine: a direct caller

- may write claimed facts, and may supersede, retract and forget **claimed** facts only; an
  attested or verified fact (a claimed one the gateway confirmed counts as attested) cannot be
  touched in any way, whatever ``actor`` the caller names;
- may not place or release legal holds, may not sweep, and may not confirm.

Two layers enforce the fact rule. The handlers ask ``guard_fact`` first, which reads the fact
and refuses at once (before any store is touched); it also returns a ``Precondition`` the ledger
checks again inside its write section, against the state it is about to change. Only that second
check is authoritative: between the first read and the write the gateway may confirm the fact,
and a check outside the write lock would then let a direct caller erase an attested fact. The
custody flows, the CLI and Python callers are not affected: the policy lives here, in the
server, and reaches the ledger only as that precondition.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.ledger import Ledger, Precondition
from agent_custody_state.ledger.queries import FactState
from agent_custody_state.ledger.rules import unknown_fact
from agent_custody_state.server.scopes import SpaceScope, allows
from agent_custody_state.server.trust import CONFIRM_NEEDS_GATEWAY, CallContext
from agent_custody_state.server.worker import LedgerWorker

#: What a ``reader`` token may call: nothing that changes memory.
READ_ONLY_TOOLS = frozenset({"memory.read", "memory.get", "memory.history"})

#: Tools a direct caller may not call at all, and why (checked before the arguments).
GATEWAY_ONLY: dict[str, str] = {
    "memory.confirm": CONFIRM_NEEDS_GATEWAY,
    "memory.hold": "legal holds come only through the receipts gateway; a direct call (no "
    "receipt) cannot place a hold",
    "memory.release": "legal holds come only through the receipts gateway; a direct call (no "
    "receipt) cannot release a hold",
    "memory.sweep": "sweeps come only through the receipts gateway; a direct call (no receipt) "
    "cannot sweep",
}


def is_direct(call: CallContext) -> bool:
    """No gateway vouches for this call: it carries no believed receipt id."""
    return call.receipt_id is None


def refusal(tool: str, call: CallContext) -> str | None:
    """Why ``call`` may not use ``tool`` at all, or None.

    ``memory.confirm`` needs an *attested* call (receipt and agent), so a gateway call without
    an agent is refused too, as it always was.
    """
    if call.role == "reader" and tool not in READ_ONLY_TOOLS:
        return f"this token may only read (role reader): {tool} changes memory"
    if tool == "memory.confirm" and call.provenance != "attested":
        return CONFIRM_NEEDS_GATEWAY
    if is_direct(call):
        return GATEWAY_ONLY.get(tool)
    return None


def effective_provenance(state: FactState) -> str:
    """The provenance a read shows: a confirmed claimed fact is attested (SPEC 2.2 rule 6)."""
    return "attested" if state.confirmed else state.assert_event.fact.provenance


def not_claimed(fact_id: str, provenance: str) -> LedgerError:
    return LedgerError(
        f"fact {fact_id} is {provenance}: a direct call (no receipt) may supersede, retract or "
        "forget only claimed facts; this must come through the receipts gateway",
        field="factId",
        code="not_claimed",
    )


def only_claimed(state: FactState) -> None:
    """The ledger precondition of a direct call: the fact it changes is still claimed."""
    provenance = effective_provenance(state)
    if provenance != "claimed":
        raise not_claimed(state.assert_event.fact_id, provenance)


@dataclass(frozen=True)
class FactGuard:
    """What ``guard_fact`` found: the ledger precondition to pass on (or None), and whether the
    fact is in a space the caller may not see (then the call must answer exactly as for an
    unknown id, touching nothing)."""

    precondition: Precondition | None = None
    hidden: bool = False


def in_scope(spaces: SpaceScope, action: str) -> Precondition:
    """The ledger precondition of a scoped call: the fact is in the caller's spaces, else the
    ledger's own unknown-fact refusal (a fact's space never changes; this only closes the gap
    of an id that did not exist when the handler looked)."""

    def check(state: FactState) -> None:
        if not spaces.allows(state.assert_event.fact.space):
            raise unknown_fact(action, state.assert_event.fact_id)

    return check


def _both(first: Precondition, second: Precondition) -> Precondition:
    def check(state: FactState) -> None:
        first(state)
        second(state)

    return check


async def guard_fact(
    ledger: Ledger, worker: LedgerWorker, call: CallContext, fact_id: str | None, action: str
) -> FactGuard:
    """For a call about to change ``fact_id``: whether the caller may see it (a scoped token),
    and for a direct call, refuse now if the fact is not claimed (``LedgerError``), else pass on
    the precondition the ledger re-checks under its write lock. Nothing to check for an
    unscoped gateway call, or when no existing fact is touched. Scope comes first: a direct
    caller must not learn an unseen fact's provenance from the refusal."""
    scoped, direct = call.spaces is not None, is_direct(call)
    if fact_id is None or not (scoped or direct):
        return FactGuard()
    fact = await worker.run(ledger.get, fact_id)
    if fact is not None and not allows(call.spaces, fact.space):
        return FactGuard(hidden=True)
    if direct and fact is not None and fact.provenance != "claimed":
        raise not_claimed(fact_id, fact.provenance)
    checks = [in_scope(call.spaces, action)] if call.spaces is not None else []
    if direct:
        checks.append(only_claimed)
    if not checks:
        return FactGuard()
    return FactGuard(checks[0] if len(checks) == 1 else _both(*checks))

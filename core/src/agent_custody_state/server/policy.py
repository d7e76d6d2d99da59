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

from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.ledger import Ledger, Precondition
from agent_custody_state.ledger.queries import FactState
from agent_custody_state.server.trust import CONFIRM_NEEDS_GATEWAY, CallContext
from agent_custody_state.server.worker import LedgerWorker

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


async def guard_fact(
    ledger: Ledger, worker: LedgerWorker, call: CallContext, fact_id: str | None
) -> Precondition | None:
    """For a direct call about to change ``fact_id``: refuse now if the fact is not claimed
    (``LedgerError``), else return the precondition the ledger re-checks under its write lock.
    None for a gateway call, or when no existing fact is touched."""
    if not is_direct(call) or fact_id is None:
        return None
    fact = await worker.run(ledger.get, fact_id)
    if fact is not None and fact.provenance != "claimed":
        raise not_claimed(fact_id, fact.provenance)
    return only_claimed

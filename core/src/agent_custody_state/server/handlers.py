"""The ten tools, one function each (SPEC 4.2).

Each takes the service, the call's context and the validated arguments and returns a
``ToolResult``; refusals are raised as ``LedgerError`` / ``EvidenceError`` / ``StoreWriteError``
and turned into error results by the service. Ledger work runs on the service's worker thread.
Mutations that reach the stores run shielded from cancellation: a caller that hangs up between
the ledger and the stores must not leave the two disagreeing.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from ..ledger.errors import LedgerError
from ..ledger.model import AssertEvent, Fact, Source
from ..mirror import Removal, forget_through, retract_through, supersede_through
from ..stores import RemovalReport
from .evidence import check_evidence
from .results import ToolResult
from .sweeping import SWEEP_NEEDS_BEFORE, run_sweep
from .trust import CONFIRM_NEEDS_GATEWAY, FACTS_KEY, CallContext

if TYPE_CHECKING:
    from .service import MemoryService

Args = dict[str, Any]
Handler = Callable[["MemoryService", CallContext, Args], Awaitable[ToolResult]]


def _still_held(report: RemovalReport) -> str:
    return "; ".join(f"{name}: {message}" for name, message in report.still_held.items())


def _restored(done: Removal[Any]) -> Args:
    """``restored`` for a result: the fact put back into the stores (only when one was)."""
    return {"restored": done.restored.to_dict()} if done.restored is not None else {}


async def write(svc: MemoryService, call: CallContext, args: Args) -> ToolResult:
    provenance = call.provenance
    evidence = args.get("evidence")
    if evidence is not None:
        check_evidence(call, evidence, args["value"])
        provenance = "verified"
    valid_from = args.get("validFrom")
    if valid_from is None and svc.stores:
        # The stores record validFrom before the ledger appends, so it is fixed now.
        valid_from = svc.ledger.now()
    fields: Args = {
        "subject": args["subject"], "predicate": args["predicate"], "value": args["value"],
        "space": args["space"], "actor": call.actor(args.get("actor")),
        "receipt_id": call.receipt_id, "provenance": provenance, "valid_from": valid_from,
        "confidence": args.get("confidence"), "supersedes": args.get("supersedes"),
        "fact_id": str(uuid.uuid4()),
    }
    with anyio.CancelScope(shield=True):
        event = await _write_through(svc, fields)
        # Stores mirror the present: the superseded value leaves the mirroring stores.
        superseded = await supersede_through(svc.ledger, svc.stores, event, run=svc.worker.run)
    data: Args = {
        "fact": event.fact.to_dict(), "eventId": event.event_id, "txTime": event.tx_time,
        "supersedes": event.supersedes,
    }
    if superseded is not None and event.supersedes is not None:
        data["mirror"] = {
            "factId": event.supersedes, "removedFrom": superseded.removed_from,
            "stillHeld": list(superseded.still_held), "verification": superseded.verification,
        }
    return ToolResult.ok(data)


async def _write_through(svc: MemoryService, fields: Args) -> AssertEvent:
    """Validate, put into every store in order, then append with the stores' ids."""
    if not svc.stores:
        return await svc.appender.assert_fact(fields)
    await svc.worker.run(svc.ledger.validate_assert, **fields)
    fact = Fact(
        fact_id=fields["fact_id"], subject=fields["subject"], predicate=fields["predicate"],
        value=fields["value"], space=fields["space"], actor=fields["actor"],
        source=Source(fields["receipt_id"]), provenance=fields["provenance"],
        valid_from=fields["valid_from"], confidence=fields["confidence"],
    )
    external = await svc.stores.put_all(fact)
    try:
        return await svc.appender.assert_fact({**fields, "external": external})
    except LedgerError as exc:
        # Another call changed the ledger between validation and append: undo the puts.
        report = await svc.stores.remove_all(fact.with_(external=external))
        undone = [f"{name}: removed" for name in report.removed_from] + [
            f"{name}: removal failed: {message}" for name, message in report.still_held.items()
        ]
        raise LedgerError(f"{exc}; compensated: {', '.join(undone)}") from exc


async def read(svc: MemoryService, call: CallContext, args: Args) -> ToolResult:
    if args.get("requireVerified"):
        include = "verified"
    elif args.get("includeClaimed"):
        include = "all"
    else:
        include = "attested"
    facts = await svc.worker.run(
        svc.ledger.as_of, valid_at=args.get("validAt"), tx_at=args.get("txAt"),
        space=args.get("space"), subject=args.get("subject"), predicate=args.get("predicate"),
        include=include,
    )
    return ToolResult.ok(
        {"facts": [fact.to_dict() for fact in facts]},
        meta={FACTS_KEY: [fact.fact_id for fact in facts]},
    )


async def confirm(svc: MemoryService, call: CallContext, args: Args) -> ToolResult:
    if call.provenance != "attested":
        return ToolResult.error(CONFIRM_NEEDS_GATEWAY)
    event = await svc.worker.run(
        svc.ledger.confirm, fact_id=args["factId"], actor=call.actor(),
        receipt_id=call.receipt_id,
    )
    return ToolResult.ok({
        "eventId": event.event_id, "factId": event.fact_id, "txTime": event.tx_time,
        "actor": event.actor, "source": event.source.to_dict(),
    })


async def retract(svc: MemoryService, call: CallContext, args: Args) -> ToolResult:
    fact_id = args["factId"]

    with anyio.CancelScope(shield=True):
        # Ledger first, then the stores; what the retraction makes current again is put back.
        done = await retract_through(
            svc.ledger, svc.stores, fact_id=fact_id, actor=call.actor(args.get("actor")),
            reason=args["reason"], receipt_id=call.receipt_id, run=svc.worker.run,
        )
    event, report = done.event, done.removal
    data = {
        "eventId": event.event_id, "factId": event.fact_id, "txTime": event.tx_time,
        "actor": event.actor, "reason": event.reason, "source": event.source.to_dict(),
        "removedFrom": report.removed_from, "verification": report.verification,
        **_restored(done),
    }
    if report.still_held:
        return ToolResult.partial(
            f"retracted in the ledger, but still held by {_still_held(report)}", data
        )
    return ToolResult.ok(data)


async def forget(svc: MemoryService, call: CallContext, args: Args) -> ToolResult:
    fact_id = args["factId"]
    with anyio.CancelScope(shield=True):
        # The stores' removal check needs the value, which the ledger erases: the flow takes
        # the fact before the erasure, and puts back what the forget makes current again.
        done = await forget_through(
            svc.ledger, svc.stores, fact_id=fact_id, actor=call.actor(), reason=args["reason"],
            receipt_id=call.receipt_id, keep_digest=args.get("keepDigest", True),
            run=svc.worker.run,
        )
    event, report = done.event, done.removal
    data = {
        "factId": event.fact_id, "valueDigest": event.value_digest,
        "digestKind": event.digest_kind, "txTime": event.tx_time, "actor": event.actor,
        "reason": event.reason, "source": event.source.to_dict(), "erasedFromLedger": True,
        "removedFrom": report.removed_from, "stillHeld": list(report.still_held),
        "verification": report.verification, **_restored(done),
    }
    if report.still_held:
        return ToolResult.partial(
            f"erased from the ledger, but still held by {_still_held(report)}", data
        )
    return ToolResult.ok(data)


async def hold(svc: MemoryService, call: CallContext, args: Args) -> ToolResult:
    event = await svc.worker.run(
        svc.ledger.hold, fact_id=args["factId"], actor=call.actor(), reason=args["reason"],
        receipt_id=call.receipt_id,
    )
    return ToolResult.ok(event.to_dict())


async def release(svc: MemoryService, call: CallContext, args: Args) -> ToolResult:
    event = await svc.worker.run(
        svc.ledger.release, fact_id=args["factId"], actor=call.actor(), reason=args["reason"],
        receipt_id=call.receipt_id,
    )
    return ToolResult.ok(event.to_dict())


async def sweep(svc: MemoryService, call: CallContext, args: Args) -> ToolResult:
    before, space = args.get("before"), args.get("space")
    if before is None and svc.retention is None:
        return ToolResult.error(SWEEP_NEEDS_BEFORE)
    with anyio.CancelScope(shield=True):
        result = await run_sweep(
            svc, before=before, space=space, actor=call.actor(), reason=args["reason"],
            receipt_id=call.receipt_id, keep_digest=args.get("keepDigest", True),
        )
    return result


async def get(svc: MemoryService, call: CallContext, args: Args) -> ToolResult:
    fact_id = args["factId"]

    def get_with_status() -> tuple[Fact | None, bool]:
        fact = svc.ledger.get(fact_id)
        return fact, (svc.ledger.is_retracted(fact_id) if fact is not None else False)

    fact, retracted = await svc.worker.run(get_with_status)
    if fact is None:
        return ToolResult.error(f"unknown fact {fact_id}")
    return ToolResult.ok(policy_shape(fact, retracted))


def policy_shape(fact: Fact, retracted: bool) -> dict[str, Any]:
    """The fact as Cedar policies see it: source as the receipt id, retracted added, no nulls.

    Cedar has no null, so null fields are left out (also inside ``forgotten``); the value itself
    is passed as written.
    """
    data = fact.to_dict()
    data["source"] = fact.source.receipt_id
    if isinstance(data.get("forgotten"), dict):
        data["forgotten"] = {k: v for k, v in data["forgotten"].items() if v is not None}
    data["retracted"] = retracted
    return {k: v for k, v in data.items() if v is not None}


async def history(svc: MemoryService, call: CallContext, args: Args) -> ToolResult:
    events = await svc.worker.run(svc.ledger.history, args["factId"])
    return ToolResult.ok({"events": [event.to_dict() for event in events]})


HANDLERS: dict[str, Handler] = {
    "memory.write": write,
    "memory.read": read,
    "memory.confirm": confirm,
    "memory.retract": retract,
    "memory.forget": forget,
    "memory.hold": hold,
    "memory.release": release,
    "memory.sweep": sweep,
    "memory.get": get,
    "memory.history": history,
}

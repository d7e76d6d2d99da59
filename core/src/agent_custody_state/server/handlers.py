"""The ten tools, one function each (SPEC 4.2): arguments in, the flows' reports out.

Each takes the service, the call's context and the validated arguments and returns a
``ToolResult``; refusals are raised as ``LedgerError`` / ``EvidenceError`` / ``StoreWriteError``
and turned into error results by the service. Everything that crosses the ledger and the stores
is a flow of ``stores.flows.Custody``; ledger-only calls run on the service's worker thread.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from agent_custody_state.ledger.chain import public_event, public_fact
from agent_custody_state.ledger.errors import EventBackendError, LedgerError
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.model import PROVENANCE_RANK, AssertEvent, Fact
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.ledger.rules import unknown_fact
from agent_custody_state.maskedtrace import log_traceback
from agent_custody_state.server.evidence import check_evidence
from agent_custody_state.server.failures import internal_error
from agent_custody_state.server.policy import FactGuard, guard_fact, is_direct
from agent_custody_state.server.results import ToolResult, rendered, rendered_partial
from agent_custody_state.server.scopes import allows, check_space, shown_events, visible_facts
from agent_custody_state.server.shapes import (
    NO_SIGNING_KEY,
    forget_shape,
    hidden_claimed_hint,
    policy_shape,
    retract_shape,
    still_held_text,
    sweep_shape,
    with_certificates,
    write_shape,
)
from agent_custody_state.server.signing import SigningIdentity
from agent_custody_state.server.trust import FACTS_KEY, CallContext
from agent_custody_state.server.worker import LedgerWorker
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.reports import SweepReport
from agent_custody_state.stores.sweep_stopped import stopped_text, swept_before

log = logging.getLogger(__name__)
#: what stops a sweep as a refusal or a failing disk does (anything else is logged with its trace)
_STOPS = (LedgerError, EventBackendError, OSError)

#: The original's text for a sweep some store could not finish, then ``<store> (<fact>): <msg>``.
SWEEP_STILL_HELD = "swept the ledger, but some values are still held by stores: "


class Services(Protocol):
    """What a tool needs (``service.MemoryService`` provides it)."""

    ledger: Ledger
    worker: LedgerWorker
    custody: Custody
    identity: SigningIdentity | None


Args = dict[str, Any]
Handler = Callable[[Services, CallContext, Args], Awaitable[ToolResult]]


async def write(svc: Services, call: CallContext, args: Args) -> ToolResult:
    check_space(call.spaces, args["space"])
    provenance = call.provenance
    evidence = args.get("evidence")
    if evidence is not None:
        check_evidence(call, evidence, args["value"])
        provenance = "verified"
    request = AssertRequest(
        subject=args["subject"],
        predicate=args["predicate"],
        value=args["value"],
        space=args["space"],
        actor=call.actor(args.get("actor")),
        receipt_id=call.receipt_id,
        provenance=provenance,
        valid_from=args.get("validFrom"),
        confidence=args.get("confidence"),
        supersedes=args.get("supersedes"),
    )
    guard = await guard_fact(svc.ledger, svc.worker, call, request.supersedes, "supersede")
    if guard.hidden and request.supersedes is not None:
        # What an unknown id gets: every other check of the assert, then the refusal.
        await svc.worker.run(svc.ledger.validate_assert, request.with_(supersedes=None))
        raise unknown_fact("supersede", request.supersedes)
    done = await svc.custody.write(request, precondition=guard.precondition)
    return await rendered(write_shape(done))


async def read(svc: Services, call: CallContext, args: Args) -> ToolResult:
    if args.get("requireVerified"):
        include = "verified"
    elif args.get("includeClaimed"):
        include = "all"
    else:
        include = "attested"
    # A direct caller's default read says how many quarantined facts it left out, so a model
    # knows to ask for includeClaimed: the same query with everything, filtered here.
    count_hidden = include == "attested" and is_direct(call)
    if args.get("space") is not None:
        check_space(call.spaces, args["space"])
    found = await svc.worker.run(
        svc.ledger.as_of,
        valid_at=args.get("validAt"),
        tx_at=args.get("txAt"),
        space=args.get("space"),
        subject=args.get("subject"),
        predicate=args.get("predicate"),
        include="all" if count_hidden else include,
    )
    found = visible_facts(call.spaces, found)
    facts = (
        [f for f in found if PROVENANCE_RANK.get(f.provenance, 0) >= 1] if count_hidden else found
    )
    data = {"facts": [public_fact(fact.to_dict()) for fact in facts]}
    hidden = len(found) - len(facts)
    result = await rendered(
        data,
        meta={FACTS_KEY: [fact.fact_id for fact in facts]},
        structured={**data, "hiddenClaimed": hidden} if hidden else None,
    )
    if hidden:
        # A second text item: the first stays the tool JSON the original answers, byte for byte.
        result.texts.append(hidden_claimed_hint(hidden))
    return result


async def _guard(svc: Services, call: CallContext, fact_id: str, action: str) -> FactGuard:
    """``guard_fact``, refusing a fact the caller's scope does not see as the ledger refuses an
    unknown id (the ledger checks only that the reason and actor are strings before that)."""
    guard = await guard_fact(svc.ledger, svc.worker, call, fact_id, action)
    if guard.hidden:
        raise unknown_fact(action, fact_id)
    return guard


async def confirm(svc: Services, call: CallContext, args: Args) -> ToolResult:
    # Only attested calls get here (policy.refusal, checked by the service).
    await _guard(svc, call, args["factId"], "confirm")
    event = await svc.worker.run(
        svc.ledger.confirm,
        fact_id=args["factId"],
        actor=call.actor(),
        receipt_id=call.receipt_id,
    )
    return ToolResult.ok(
        {
            "eventId": event.event_id,
            "factId": event.fact_id,
            "txTime": event.tx_time,
            "actor": event.actor,
            "source": event.source.to_dict(),
        }
    )


async def retract(svc: Services, call: CallContext, args: Args) -> ToolResult:
    guard = await _guard(svc, call, args["factId"], "retract")
    done = await svc.custody.retract(
        fact_id=args["factId"],
        actor=call.actor(args.get("actor")),
        reason=args["reason"],
        receipt_id=call.receipt_id,
        precondition=guard.precondition,
    )
    if done.removal.still_held:
        return await rendered_partial(
            f"retracted in the ledger, but still held by {still_held_text(done.removal)}",
            retract_shape(done),
        )
    return await rendered(retract_shape(done))


async def forget(svc: Services, call: CallContext, args: Args) -> ToolResult:
    certify = bool(args.get("certificate"))
    if certify and svc.identity is None:
        return ToolResult.error(
            NO_SIGNING_KEY.format(what="an erasure certificate is"), "no_signing_key"
        )
    guard = await _guard(svc, call, args["factId"], "forget")
    done = await svc.custody.forget(
        fact_id=args["factId"],
        actor=call.actor(),
        reason=args["reason"],
        receipt_id=call.receipt_id,
        keep_digest=args.get("keepDigest", True),
        precondition=guard.precondition,
        certificate=certify,
    )
    if done.removal.still_held:
        result = await rendered_partial(
            f"erased from the ledger, but still held by {still_held_text(done.removal)}",
            forget_shape(done),
        )
    else:
        result = await rendered(forget_shape(done))
    if certify and done.certificate is not None:  # an archive's are kept, not always shown
        with_certificates(result, done.certificate)
    return result


async def hold(svc: Services, call: CallContext, args: Args) -> ToolResult:
    await _guard(svc, call, args["factId"], "hold")
    event = await svc.worker.run(
        svc.ledger.hold,
        fact_id=args["factId"],
        actor=call.actor(),
        reason=args["reason"],
        receipt_id=call.receipt_id,
    )
    return ToolResult.ok(public_event(event))


async def release(svc: Services, call: CallContext, args: Args) -> ToolResult:
    await _guard(svc, call, args["factId"], "release")
    event = await svc.worker.run(
        svc.ledger.release,
        fact_id=args["factId"],
        actor=call.actor(),
        reason=args["reason"],
        receipt_id=call.receipt_id,
    )
    return ToolResult.ok(public_event(event))


async def sweep(svc: Services, call: CallContext, args: Args) -> ToolResult:
    if args.get("space") is not None:
        check_space(call.spaces, args["space"])
    certify = bool(args.get("certificates"))
    if certify and svc.identity is None:
        return ToolResult.error(
            NO_SIGNING_KEY.format(what="erasure certificates are"), "no_signing_key"
        )
    try:
        report = await svc.custody.sweep(
            within=call.spaces.allows if call.spaces is not None else None,
            before=args.get("before"),
            space=args.get("space"),
            actor=call.actor(),
            reason=args["reason"],
            receipt_id=call.receipt_id,
            keep_digest=args.get("keepDigest", True),
            certificates=certify,
            progress=call.progress,
        )
    except Exception as exc:
        swept = swept_before(exc)
        if swept is None:
            raise  # it forgot nothing: the error says it all
        result = await _stopped_sweep(exc, swept)
        if certify:
            with_certificates(result, {s.event.fact_id: s.certificate for s in swept.forgotten})
        return result
    problems = report.problems()
    if problems:
        result = await rendered_partial(
            f"{SWEEP_STILL_HELD}{'; '.join(problems)}", sweep_shape(report)
        )
    else:
        result = await rendered(sweep_shape(report))
    if certify:
        with_certificates(result, {s.event.fact_id: s.certificate for s in report.forgotten})
    return result


async def _stopped_sweep(exc: Exception, report: SweepReport) -> ToolResult:
    """A sweep a fact stopped part-way (a full disk): its error, said of the sweep as the
    ``sweep`` command says it (``stores.sweep_stopped``: the facts forgotten before stand),
    first, and the JSON of what it did second, as a sweep a store could not finish; the
    structured content keeps the error's ``code``, when it has one.

    An unexpected exception (a bug, a driver's error no layer turned into a refusal) may quote
    the fact it stopped at, whose value the sweep was erasing: the result names its type only,
    as ``service`` does for any tool (``failures.internal_error``), and the log its traceback
    with no exception's message (``maskedtrace``: the values forgotten are not known here to
    be masked, and must not outlive their forget in a log)."""
    if isinstance(exc, _STOPS):
        message = stopped_text(exc, report)
        log.error("memory.sweep: %s", message)
    else:
        message = stopped_text(internal_error("memory.sweep", exc), report)
        log_traceback(log, logging.ERROR, exc, None, "memory.sweep: %s", message)
    result = await rendered_partial(message, sweep_shape(report))
    code = getattr(exc, "code", None)
    if isinstance(exc, _STOPS) and isinstance(code, str) and result.structured is not None:
        result.structured["code"] = code
    return result


async def get(svc: Services, call: CallContext, args: Args) -> ToolResult:
    fact_id = args["factId"]

    def get_with_status() -> tuple[Fact | None, bool]:
        fact = svc.ledger.get(fact_id)
        return fact, (svc.ledger.is_retracted(fact_id) if fact is not None else False)

    fact, retracted = await svc.worker.run(get_with_status)
    if fact is None or not allows(call.spaces, fact.space):
        return ToolResult.error(f"unknown fact {fact_id}", "unknown_fact")
    return await rendered(policy_shape(fact, retracted))


async def history(svc: Services, call: CallContext, args: Args) -> ToolResult:
    fact_id = args["factId"]
    events = await svc.worker.run(svc.ledger.history, fact_id)
    if call.spaces is not None:
        own = next((e for e in events if isinstance(e, AssertEvent) and e.fact_id == fact_id), None)
        # An unseen fact's history is an unknown id's: empty, whatever cites it.
        hidden = own is not None and not call.spaces.allows(own.fact.space)
        if hidden:
            return await rendered({"events": []})
    shown = await svc.worker.run(shown_events, svc.ledger, call.spaces, events)
    return await rendered({"events": shown})


#: The ledger's Python parameter names that a tool argument carries under another (wire) name.
_WIRE_NAMES = {
    "fact_id": "factId",
    "valid_from": "validFrom",
    "valid_at": "validAt",
    "tx_at": "txAt",
    "keep_digest": "keepDigest",
}


def _wire_named(handler: Handler) -> Handler:
    """``handler``, its ledger refusals naming the argument as the caller sent it: the ledger
    names its Python parameter (``fact_id is too long: ...``), which no tool argument is called
    (``factId``). The text is otherwise the ledger's, and the error's ``code`` is kept."""

    async def named(svc: Services, call: CallContext, args: Args) -> ToolResult:
        try:
            return await handler(svc, call, args)
        except LedgerError as exc:
            wire = _WIRE_NAMES.get(exc.field or "")
            text = str(exc)
            if wire is None or not text.startswith(f"{exc.field} "):
                raise
            renamed = LedgerError(wire + text[len(exc.field or "") :], field=exc.field)
            renamed.code = exc.code
            raise renamed from None

    return named


HANDLERS: dict[str, Handler] = {
    name: _wire_named(handler)
    for name, handler in (
        ("memory.write", write),
        ("memory.read", read),
        ("memory.confirm", confirm),
        ("memory.retract", retract),
        ("memory.forget", forget),
        ("memory.hold", hold),
        ("memory.release", release),
        ("memory.sweep", sweep),
        ("memory.get", get),
        ("memory.history", history),
    )
}

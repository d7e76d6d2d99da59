"""The tools' JSON (SPEC 4.2): the flows' typed reports turned into the wire shapes.

Kept apart from the handlers so the command line prints exactly what the tools answer
(``sweep --json``) without going through a tool call.
"""

from __future__ import annotations

from typing import Any

from agent_custody_state.canonical import js_json
from agent_custody_state.ledger.chain import public_fact
from agent_custody_state.ledger.model import Fact
from agent_custody_state.server.results import ToolResult
from agent_custody_state.stores.flows import Removal, SweepReport, WriteReport
from agent_custody_state.stores.storeset import RemovalReport


def still_held_text(report: RemovalReport) -> str:
    return "; ".join(f"{name}: {message}" for name, message in report.still_held.items())


def _restored(done: Removal[Any]) -> dict[str, Any]:
    """``restored`` for a result: the fact put back into the stores (only when one was)."""
    return {"restored": public_fact(done.restored.to_dict())} if done.restored is not None else {}


def write_shape(report: WriteReport) -> dict[str, Any]:
    event = report.event
    data: dict[str, Any] = {
        "fact": public_fact(event.fact.to_dict()),
        "eventId": event.event_id,
        "txTime": event.tx_time,
        "supersedes": event.supersedes,
    }
    if report.mirror is not None and event.supersedes is not None:
        data["mirror"] = {
            "factId": event.supersedes,
            "removedFrom": report.mirror.removed_from,
            "stillHeld": list(report.mirror.still_held),
            "verification": report.mirror.verification,
        }
    return data


def retract_shape(done: Removal[Any]) -> dict[str, Any]:
    event, report = done.event, done.removal
    return {
        "eventId": event.event_id,
        "factId": event.fact_id,
        "txTime": event.tx_time,
        "actor": event.actor,
        "reason": event.reason,
        "source": event.source.to_dict(),
        "removedFrom": report.removed_from,
        "verification": report.verification,
        **_restored(done),
    }


def forget_shape(done: Removal[Any]) -> dict[str, Any]:
    event, report = done.event, done.removal
    return {
        "factId": event.fact_id,
        "valueDigest": event.value_digest,
        "digestKind": event.digest_kind,
        "txTime": event.tx_time,
        "actor": event.actor,
        "reason": event.reason,
        "source": event.source.to_dict(),
        "erasedFromLedger": True,
        "removedFrom": report.removed_from,
        "stillHeld": list(report.still_held),
        "verification": report.verification,
        **_restored(done),
    }


def sweep_shape(report: SweepReport) -> dict[str, Any]:
    return {
        "before": report.before,
        "retention": report.retention.as_dict() if report.retention is not None else None,
        "space": report.space,
        "forgotten": [
            {
                "factId": s.event.fact_id,
                "valueDigest": s.event.value_digest,
                "digestKind": s.event.digest_kind,
                "removedFrom": s.removal.removed_from,
                "verification": s.removal.verification,
                **({"restored": s.restored.to_dict()} if s.restored is not None else {}),
            }
            for s in report.forgotten
        ],
        "held": report.held,
        "stillHeld": report.still_held,
    }


def policy_shape(fact: Fact, retracted: bool) -> dict[str, Any]:
    """The fact as Cedar policies see it: source as the receipt id, retracted added, no nulls.

    Cedar has no null, so null fields are left out (also inside ``forgotten``); the value itself
    is passed as written.
    """
    data = public_fact(fact.to_dict())
    data["source"] = fact.source.receipt_id
    if isinstance(data.get("forgotten"), dict):
        data["forgotten"] = {k: v for k, v in data["forgotten"].items() if v is not None}
    data["retracted"] = retracted
    return {k: v for k, v in data.items() if v is not None}


def hidden_claimed_hint(hidden: int) -> str:
    """The second text item of a direct read that left quarantined facts out."""
    facts = "fact" if hidden == 1 else "facts"
    return (
        f"hiddenClaimed: {hidden} quarantined (claimed) {facts} left out; "
        "read again with includeClaimed: true to see them"
    )


NO_SIGNING_KEY = (
    "{what} signed with the server's key, and this server has none: start it "
    "with --key (or key = ... in its config; agent-custody-memory keygen makes one); nothing "
    "was forgotten"
)


def with_certificates(result: ToolResult, certificate: dict[str, Any]) -> None:
    """Add a forget's certificate (or a sweep's, by fact id) to ``result`` without changing the
    original's text: into the structured content (inside ``partial`` for a half-done removal)
    and as one more text item, ``{"certificate": ...}`` or ``{"certificates": {factId: ...}}``,
    after every item the TypeScript server writes."""
    data = result.structured or {}
    data = data.get("partial", data) if result.is_error else data
    sweep = "forgotten" in data
    if sweep:
        for item in data["forgotten"]:
            if certificate.get(item["factId"]) is not None:
                item["certificate"] = certificate[item["factId"]]
    else:
        data["certificate"] = certificate
    result.texts.append(js_json({"certificates" if sweep else "certificate": certificate}))

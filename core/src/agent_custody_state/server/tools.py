"""The ten MCP tools: names, JSON input schemas and descriptions, in SPEC 4 listing order.

The schemas are the single source of truth for argument checking: ``validation.py`` walks them to
produce ``invalid arguments: <field path>: <message>`` refusals, so what ``tools/list`` promises
and what a call is held to cannot drift apart; every string argument without a limit of its own
lists ``maxLength`` 4,096 (``validation.MAX_TEXT``), the length a call is held to. Wire names are camelCase, as the TypeScript server
and the receipts gateway expect.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_custody_state.server.validation import MAX_TEXT

_FACT_ID = {"type": "string", "minLength": 1, "description": "The fact's id (factId)."}
_REASON = {
    "type": "string",
    "minLength": 1,  # the original refuses an empty reason (and an empty actor)
    "maxLength": 65_536,  # every other string argument: at most 4,096 (validation.py)
    "description": "Why: recorded on the event, shown in audits.",
}
_TIME = {"type": "string", "format": "date-time"}


def _time(description: str) -> dict[str, Any]:
    return {**_TIME, "description": description + " RFC 3339 with an offset (Z or +hh:mm)."}


def _text(description: str) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "description": description}


WRITE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "subject": _text("What the fact is about, e.g. acct:42."),
        "predicate": _text("Which property of the subject, e.g. plan."),
        "value": {"description": "The value: any JSON."},
        "space": _text("The memory space, e.g. org, team:support, user:dana."),
        "actor": {
            "type": "string",
            "minLength": 1,
            "description": "Who writes (direct callers only; through the gateway the grant's "
            "agent is the actor).",
        },
        "validFrom": _time("When the fact became true; default: now."),
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "supersedes": {
            "type": "string",
            "minLength": 1,
            "description": "The factId this fact replaces; it stops being believed.",
        },
        "evidence": {
            "type": "object",
            "description": "A fact the gateway fetched for this call; the value must equal it "
            "(or the field at path) and the write is then verified.",
            "properties": {
                "fact": _text("The name of the gateway's fact lookup."),
                "path": {"type": "string", "description": "Dotted path into it, e.g. plan.tier."},
            },
            "required": ["fact"],
        },
    },
    "required": ["subject", "predicate", "value", "space"],
    "additionalProperties": True,
}

READ_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "subject": _text("Only facts about this subject."),
        "predicate": _text("Only this predicate."),
        "space": _text("Only this space."),
        "validAt": _time("What was true then; default: now."),
        "txAt": _time("What the ledger knew then; default: now."),
        "includeClaimed": {
            "type": "boolean",
            "description": "Include quarantined (claimed) facts.",
        },
        "requireVerified": {"type": "boolean", "description": "Only verified facts."},
    },
}

_FACT_ONLY: dict[str, Any] = {
    "type": "object",
    "properties": {"factId": _FACT_ID},
    "required": ["factId"],
}

_FACT_AND_REASON: dict[str, Any] = {
    "type": "object",
    "properties": {"factId": _FACT_ID, "reason": _REASON},
    "required": ["factId", "reason"],
}

RETRACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "factId": _FACT_ID,
        "reason": _REASON,
        "actor": {
            "type": "string",
            "minLength": 1,
            "description": "Who retracts (direct callers only).",
        },
    },
    "required": ["factId", "reason"],
}

FORGET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "factId": _FACT_ID,
        "reason": _REASON,
        "keepDigest": {
            "type": "boolean",
            "description": "Keep a digest of the erased value (default true).",
        },
        "certificate": {
            "type": "boolean",
            "description": "Also return a signed erasure certificate (needs the server's key).",
        },
    },
    "required": ["factId", "reason"],
}

SWEEP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reason": _REASON,
        "before": _time("Forget every fact the ledger learned before this instant."),
        "space": _text("Only this space."),
        "keepDigest": {"type": "boolean", "description": "Keep digests (default true)."},
        "certificates": {
            "type": "boolean",
            "description": "Also return a signed erasure certificate per forgotten fact (needs "
            "the server's key).",
        },
    },
    "required": ["reason"],
}


def _bounded(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` with ``maxLength: MAX_TEXT`` on every string property that has no limit of its
    own (nested objects included): what ``validation.py`` holds such an argument to."""
    out = dict(schema)
    if out.get("type") == "string":
        out.setdefault("maxLength", MAX_TEXT)
    if "properties" in out:
        out["properties"] = {name: _bounded(sub) for name, sub in out["properties"].items()}
    return out


#: (name, description, input schema) in the order ``tools/list`` returns them (SPEC 4).
TOOLS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    (
        "memory.write",
        "Write a fact to governed memory. Through the receipts gateway it is attested (the "
        "grant's agent is the actor); with evidence equal to a fact the gateway fetched it is "
        "verified; a direct write is claimed and quarantined. supersedes names the fact this one "
        "replaces. Returns {fact, eventId, txTime, supersedes}.",
        _bounded(WRITE_SCHEMA),
    ),
    (
        "memory.read",
        "Read what is believed: at validAt (what was true then) as the ledger knew it at txAt "
        "(both default to now). Quarantined facts are left out unless includeClaimed; "
        "requireVerified returns only verified ones. Returns {facts}.",
        _bounded(READ_SCHEMA),
    ),
    (
        "memory.confirm",
        "Lift a quarantined (claimed) fact to attested. Only through the receipts gateway.",
        _bounded(_FACT_ONLY),
    ),
    (
        "memory.retract",
        "Retract a fact: it leaves the present, stays visible to questions about the past, and "
        "whatever it superseded is believed again. The ledger first, then every store.",
        _bounded(RETRACT_SCHEMA),
    ),
    (
        "memory.forget",
        "Erase a fact's value from the ledger (keeping its digest unless keepDigest is false) and "
        "from every store. Refused while a legal hold stands. The receipt of this call is the "
        "certificate.",
        _bounded(FORGET_SCHEMA),
    ),
    (
        "memory.hold",
        "Place a legal hold on a fact: forget and sweep are refused until it is released.",
        _bounded(_FACT_AND_REASON),
    ),
    ("memory.release", "Release a legal hold.", _bounded(_FACT_AND_REASON)),
    (
        "memory.sweep",
        "Retention: forget every fact the ledger learned before an instant, in one space or all, "
        "skipping held facts. Without before, the server's retention windows decide per space.",
        _bounded(SWEEP_SCHEMA),
    ),
    (
        "memory.get",
        "One fact in any state, shaped for policy: source as the receipt id, retracted added, "
        "null fields omitted.",
        _bounded(_FACT_ONLY),
    ),
    (
        "memory.history",
        "Every event of a fact, oldest first: its assert, the asserts superseding it, confirms, "
        "retracts, forgets, holds and releases.",
        _bounded(_FACT_ONLY),
    ),
)

TOOL_NAMES: tuple[str, ...] = tuple(name for name, _, _ in TOOLS)
SCHEMAS: dict[str, dict[str, Any]] = {name: schema for name, _, schema in TOOLS}

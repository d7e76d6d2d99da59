"""What each tool answers, as JSON Schema (``outputSchema``), and its annotations (MCP 2025-06-18+).

Every tool's ``structuredContent`` validates against its own ``outputSchema``, errors included:
a success is the tool's JSON (the same object the first text item holds), a refusal is
``{"error": <message>, "code"?: <LedgerError code>}`` and a half-done removal (the ledger changed,
a store did not) is ``{"error": <message>, "partial": <the success JSON>}``. The root is
``type: object`` with ``anyOf`` the two branches, which is what 2025-11-25 clients accept.

Annotations are hints for clients (the spec counts an unannotated tool as destructive): reads are
read-only; forget and sweep are destructive; nothing else erases. ``openWorldHint`` is true only
for the tools that write through to configured stores, so it depends on the server's stores.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types

_STR = {"type": "string"}
_NULLABLE_STR = {"type": ["string", "null"]}
_STR_LIST = {"type": "array", "items": _STR}
_SOURCE = {
    "type": "object",
    "properties": {"receiptId": _NULLABLE_STR},
    "required": ["receiptId"],
}
_PROVENANCE = {"enum": ["claimed", "attested", "verified"]}
_VERIFICATION = {
    "type": "object",
    "additionalProperties": {"enum": ["verified", "stillIndexed", "unverified", "failed"]},
}
_FORGOTTEN = {
    "type": "object",
    "properties": {"valueDigest": _NULLABLE_STR, "digestKind": _STR, "at": _STR},
    "required": ["digestKind", "at"],
}

FACT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "factId": _STR,
        "subject": _STR,
        "predicate": _STR,
        "value": {},
        "space": _STR,
        "actor": _STR,
        "source": _SOURCE,
        "provenance": _PROVENANCE,
        "external": {"type": "object", "additionalProperties": _STR},
        "validFrom": _STR,
        "validTo": _NULLABLE_STR,
        "confidence": {"type": ["number", "null"]},
        "forgotten": _FORGOTTEN,
    },
    "required": ["factId", "subject", "predicate", "space", "actor", "source", "provenance"],
}

#: ``memory.get``: the fact as policies see it (source is the receipt id, no nulls).
POLICY_FACT: dict[str, Any] = {
    "type": "object",
    "properties": {
        **FACT["properties"],
        "source": _STR,
        "validTo": _STR,
        "confidence": {"type": "number"},
        "retracted": {"type": "boolean"},
        "forgotten": {"type": "object", "additionalProperties": _STR},
    },
    "required": ["factId", "subject", "predicate", "space", "actor", "provenance", "retracted"],
}

EVENT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "eventId": _STR,
        "kind": {"enum": ["assert", "retract", "confirm", "forget", "hold", "release"]},
        "txTime": _STR,
        "factId": _STR,
        "fact": FACT,
        "actor": _STR,
        "reason": _STR,
        "source": _SOURCE,
    },
    "required": ["eventId", "kind", "txTime"],
}

_ACTION: dict[str, Any] = {
    "type": "object",
    "properties": {
        "eventId": _STR,
        "kind": _STR,
        "txTime": _STR,
        "factId": _STR,
        "actor": _STR,
        "reason": _STR,
        "source": _SOURCE,
    },
    "required": ["eventId", "kind", "txTime", "factId", "actor", "reason", "source"],
}

_RESTORED = {
    "type": "object",
    "description": "The fact put back into the stores because it became current again.",
    "properties": {
        "factId": _STR,
        "external": {"type": "object", "additionalProperties": _STR},
        "failed": {"type": "object", "additionalProperties": _STR},
    },
    "required": ["factId", "external", "failed"],
}
_CERTIFICATE = {
    "type": "object",
    "description": "The signed erasure certificate (a DSSE envelope over an in-toto statement; "
    "docs/proofs.md), when asked for. Also the last text item, as {certificate}.",
    "properties": {"payloadType": _STR, "payload": _STR, "signatures": {"type": "array"}},
    "required": ["payloadType", "payload", "signatures"],
}
_REMOVAL: dict[str, Any] = {
    "removedFrom": _STR_LIST,
    "verification": _VERIFICATION,
    "restored": _RESTORED,
}

_SUCCESS: dict[str, dict[str, Any]] = {
    "memory.write": {
        "type": "object",
        "properties": {
            "fact": FACT,
            "eventId": _STR,
            "txTime": _STR,
            "supersedes": _NULLABLE_STR,
            "mirror": {
                "type": "object",
                "properties": {
                    "factId": _STR,
                    "removedFrom": _STR_LIST,
                    "stillHeld": _STR_LIST,
                    "verification": _VERIFICATION,
                },
                "required": ["factId", "removedFrom", "stillHeld", "verification"],
            },
        },
        "required": ["fact", "eventId", "txTime", "supersedes"],
    },
    "memory.read": {
        "type": "object",
        "properties": {
            "facts": {"type": "array", "items": FACT},
            "hiddenClaimed": {
                "type": "integer",
                "minimum": 1,
                "description": "Quarantined facts left out of this direct read (ask again "
                "with includeClaimed to see them). Absent when none were hidden.",
            },
        },
        "required": ["facts"],
    },
    "memory.confirm": {
        "type": "object",
        "properties": {
            "eventId": _STR,
            "factId": _STR,
            "txTime": _STR,
            "actor": _STR,
            "source": _SOURCE,
        },
        "required": ["eventId", "factId", "txTime", "actor", "source"],
    },
    "memory.retract": {
        "type": "object",
        "properties": {**_ACTION["properties"], **_REMOVAL},
        "required": ["eventId", "factId", "txTime", "actor", "reason", "source", "removedFrom"],
    },
    "memory.forget": {
        "type": "object",
        "properties": {
            "factId": _STR,
            "valueDigest": _NULLABLE_STR,
            "digestKind": _STR,
            "txTime": _STR,
            "actor": _STR,
            "reason": _STR,
            "source": _SOURCE,
            "erasedFromLedger": {"const": True},
            "stillHeld": _STR_LIST,
            "certificate": _CERTIFICATE,
            **_REMOVAL,
        },
        "required": ["factId", "digestKind", "txTime", "erasedFromLedger", "removedFrom"],
    },
    "memory.hold": _ACTION,
    "memory.release": _ACTION,
    "memory.sweep": {
        "type": "object",
        "properties": {
            "before": _NULLABLE_STR,
            "retention": {"type": ["object", "null"], "additionalProperties": _STR},
            "space": _NULLABLE_STR,
            "forgotten": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "factId": _STR,
                        "valueDigest": _NULLABLE_STR,
                        "digestKind": _STR,
                        "removedFrom": _STR_LIST,
                        "verification": _VERIFICATION,
                        "certificate": _CERTIFICATE,
                        "restored": _RESTORED,
                    },
                    "required": ["factId", "digestKind", "removedFrom"],
                },
            },
            "held": _STR_LIST,
            "stillHeld": _STR_LIST,
        },
        "required": ["before", "space", "forgotten", "held", "stillHeld"],
    },
    "memory.get": POLICY_FACT,
    "memory.history": {
        "type": "object",
        "properties": {"events": {"type": "array", "items": EVENT}},
        "required": ["events"],
    },
}


def _error(success: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "error": {"type": "string", "description": "Why the call failed (the text item)."},
            "code": {"type": "string", "description": "A stable error code, when known."},
            "partial": {
                **success,
                "description": "What did happen: the ledger changed but a store did not.",
            },
        },
        "required": ["error"],
        "additionalProperties": False,
    }


def output_schema(tool: str) -> dict[str, Any]:
    """The ``outputSchema`` of ``tool``: its success shape or its error shape."""
    success = _SUCCESS[tool]
    return {"type": "object", "anyOf": [success, _error(success)]}


#: (title, readOnly, destructive, idempotent, writes stores) per tool.
_HINTS: dict[str, tuple[str, bool, bool, bool, bool]] = {
    "memory.write": ("Write a fact", False, False, False, True),
    "memory.read": ("Read believed facts", True, False, True, False),
    "memory.confirm": ("Confirm a quarantined fact", False, False, True, False),
    "memory.retract": ("Retract a fact", False, False, False, True),
    "memory.forget": ("Forget (erase) a fact", False, True, True, True),
    "memory.hold": ("Place a legal hold", False, False, True, False),
    "memory.release": ("Release a legal hold", False, False, False, False),
    "memory.sweep": ("Retention sweep", False, True, False, True),
    "memory.get": ("Get one fact", True, False, True, False),
    "memory.history": ("A fact's history", True, False, True, False),
}


def tool_annotations(tool: str, *, has_stores: bool) -> types.ToolAnnotations:
    """The annotations of ``tool``; ``openWorldHint`` only when it writes configured stores."""
    title, read_only, destructive, idempotent, writes_stores = _HINTS[tool]
    return types.ToolAnnotations(
        title=title,
        read_only_hint=read_only,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=writes_stores and has_stores,
    )


def titled(tool: str) -> str:
    return _HINTS[tool][0]

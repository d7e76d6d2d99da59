"""SPEC 4 / 4.2, table-driven: each of the ten tools against the SPEC's own texts.

Result keys (in the SPEC's order), error texts and ``isError`` for every tool, served in process
by ``MemoryService`` as the gateway calls it (receipt and agent in ``_meta``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state import Ledger
from agent_custody_state.server.service import MemoryService
from agent_custody_state.server.tools import TOOL_NAMES

RECEIPT, AGENT, OBSERVED = "agent-custody/receipt", "agent-custody/agent", "agent-custody/observed"
FACT_KEYS = [
    "factId",
    "subject",
    "predicate",
    "value",
    "space",
    "actor",
    "source",
    "provenance",
    "validFrom",
    "validTo",
    "confidence",
]


class Harness:
    def __init__(self, service: MemoryService) -> None:
        self.service = service
        self.n = 0

    def call(
        self,
        tool: str,
        args: dict[str, Any],
        meta: dict[str, Any] | None = None,
        role: str = "gateway",
    ) -> Any:
        return anyio.run(self.service.call, tool, args, meta, role)

    def gw(self, tool: str, args: dict[str, Any], **meta: Any) -> Any:
        self.n += 1
        full = {RECEIPT: f"rcpt-{self.n}", AGENT: "agent-a", **meta}
        return self.call(tool, args, {k: v for k, v in full.items() if v is not None})

    def ok(self, tool: str, args: dict[str, Any], **meta: Any) -> dict[str, Any]:
        result = self.gw(tool, args, **meta)
        assert not result.is_error, result.texts
        assert len(result.texts) == 1
        return json.loads(result.texts[0])  # type: ignore[no-any-return]

    def fact(self, **args: Any) -> str:
        self.n += 1
        base = {"subject": f"acct:{self.n}", "predicate": "plan", "value": "pro", "space": "org"}
        return str(self.ok("memory.write", {**base, **args})["fact"]["factId"])


@pytest.fixture
def h(tmp_path: Path) -> Iterator[Harness]:
    ledger = Ledger(tmp_path / "l.jsonl")
    service = MemoryService.build(ledger, require_gateway=False, retention="sweep:*=PT0S")
    try:
        yield Harness(service)
    finally:
        service.close()
        ledger.close()


def test_tool_names_in_listing_order() -> None:
    assert TOOL_NAMES == (
        "memory.write",
        "memory.read",
        "memory.confirm",
        "memory.retract",
        "memory.forget",
        "memory.hold",
        "memory.release",
        "memory.sweep",
        "memory.get",
        "memory.history",
    )


EVENT = ["eventId", "kind", "txTime", "factId", "actor", "reason", "source"]
SUCCESS: list[tuple[str, dict[str, Any], list[str]]] = [
    ("memory.read", {"subject": "{subject}"}, ["facts"]),
    ("memory.confirm", {"factId": "{claimed}"}, ["eventId", "factId", "txTime", "actor", "source"]),
    (
        "memory.retract",
        {"factId": "{id}", "reason": "r"},
        ["eventId", "factId", "txTime", "actor", "reason", "source", "removedFrom", "verification"],
    ),
    (
        "memory.forget",
        {"factId": "{id}", "reason": "r"},
        [
            "factId",
            "valueDigest",
            "digestKind",
            "txTime",
            "actor",
            "reason",
            "source",
            "erasedFromLedger",
            "removedFrom",
            "stillHeld",
            "verification",
        ],
    ),
    ("memory.hold", {"factId": "{id}", "reason": "r"}, EVENT),
    (
        "memory.sweep",
        {"reason": "r", "before": "2000-01-01T00:00:00Z"},
        ["before", "retention", "space", "forgotten", "held", "stillHeld"],
    ),
    (
        "memory.get",
        {"factId": "{id}"},
        [
            "factId",
            "subject",
            "predicate",
            "value",
            "space",
            "actor",
            "source",
            "provenance",
            "validFrom",
            "retracted",
        ],
    ),
    ("memory.history", {"factId": "{id}"}, ["events"]),
]


@pytest.mark.parametrize(("tool", "args", "keys"), SUCCESS, ids=[s[0] for s in SUCCESS])
def test_success_keys(h: Harness, tool: str, args: dict[str, Any], keys: list[str]) -> None:
    fact_id = h.fact(subject="acct:keys")
    claimed = str(
        h.ok(
            "memory.write",
            {"subject": "acct:c", "predicate": "p", "value": 1, "space": "org"},
            **{AGENT: None},
        )["fact"]["factId"]
    )
    filled = {
        k: v.format(id=fact_id, claimed=claimed, subject="acct:keys") if isinstance(v, str) else v
        for k, v in args.items()
    }
    data = h.ok(tool, filled)
    assert list(data) == keys


def test_write_result(h: Harness) -> None:
    args = {
        "subject": "acct:w",
        "predicate": "plan",
        "value": {"a": 1},
        "space": "org",
        "actor": "ignored",
        "lookupKey": "extra is ignored",
    }
    data = h.ok("memory.write", args)
    assert list(data) == ["fact", "eventId", "txTime", "supersedes"]
    fact = data["fact"]
    assert list(fact) == FACT_KEYS
    assert fact["actor"] == "agent-a"
    assert fact["provenance"] == "attested"
    assert fact["source"] == {"receiptId": f"rcpt-{h.n}"}
    assert data["supersedes"] is None
    assert fact["validFrom"] == data["txTime"]


def test_write_receipt_only_is_claimed_with_the_actor_argument(h: Harness) -> None:
    data = h.ok(
        "memory.write",
        {"subject": "s", "predicate": "p", "value": 1, "space": "org", "actor": "me"},
        **{AGENT: None},
    )
    assert data["fact"]["provenance"] == "claimed"
    assert data["fact"]["actor"] == "me"
    data = h.ok(
        "memory.write",
        {"subject": "s2", "predicate": "p", "value": 1, "space": "org"},
        **{AGENT: None},
    )
    assert data["fact"]["actor"] == "anonymous"


def test_read_meta_and_include(h: Harness) -> None:
    attested = h.fact(subject="acct:r")
    claimed = str(
        h.ok(
            "memory.write",
            {"subject": "acct:r", "predicate": "q", "value": 1, "space": "org"},
            **{AGENT: None},
        )["fact"]["factId"]
    )
    verified = str(
        h.ok(
            "memory.write",
            {
                "subject": "acct:r",
                "predicate": "v",
                "value": "x",
                "space": "org",
                "evidence": {"fact": "crm"},
            },
            **{OBSERVED: {"crm": "x"}},
        )["fact"]["factId"]
    )
    result = h.gw("memory.read", {"subject": "acct:r"})
    ids = [f["factId"] for f in json.loads(result.texts[0])["facts"]]
    assert ids == [attested, verified]
    assert result.meta["agent-custody/facts"] == ids
    every = h.ok("memory.read", {"subject": "acct:r", "includeClaimed": True})["facts"]
    assert [f["factId"] for f in every] == [attested, claimed, verified]
    only = h.ok(
        "memory.read", {"subject": "acct:r", "requireVerified": True, "includeClaimed": True}
    )["facts"]
    assert [f["factId"] for f in only] == [verified]


def _errors(ids: dict[str, str]) -> list[tuple[str, dict[str, Any], str]]:
    u = "00000000-0000-4000-8000-000000000000"
    return [
        ("memory.nope", {}, "unknown tool memory.nope"),
        (
            "memory.write",
            {"subject": "", "space": "org"},
            "invalid arguments: subject: must not be empty; predicate: required; value: required",
        ),
        (
            "memory.write",
            {
                "subject": "s",
                "predicate": "p",
                "value": 1,
                "space": "org",
                "validFrom": "2026-01-01T00:00:00",
            },
            "invalid arguments: validFrom: ",
        ),
        (
            "memory.write",
            {"subject": "s", "predicate": "p", "value": 1, "space": "org", "confidence": 2},
            "invalid arguments: confidence: ",
        ),
        (
            "memory.write",
            {"subject": "s", "predicate": "p", "value": 1, "space": "org", "supersedes": u},
            f"cannot supersede unknown fact {u}",
        ),
        (
            "memory.write",
            {
                "subject": "other",
                "predicate": "plan",
                "value": 1,
                "space": "org",
                "supersedes": ids["id"],
            },
            "a replacement must keep the subject and predicate of the fact it supersedes",
        ),
        (
            "memory.write",
            {"subject": "s", "predicate": "p", "value": 1, "space": "org", "actor": ""},
            "invalid arguments: actor: must not be empty",
        ),
        (
            "memory.retract",
            {"factId": ids["id"], "reason": "", "actor": ""},
            "invalid arguments: reason: must not be empty; actor: must not be empty",
        ),
        (
            "memory.forget",
            {"factId": ids["id"], "reason": ""},
            "invalid arguments: reason: must not be empty",
        ),
        (
            "memory.hold",
            {"factId": ids["id"], "reason": ""},
            "invalid arguments: reason: must not be empty",
        ),
        (
            "memory.release",
            {"factId": ids["held"], "reason": ""},
            "invalid arguments: reason: must not be empty",
        ),
        (
            "memory.sweep",
            {"reason": "", "before": "2000-01-01T00:00:00Z"},
            "invalid arguments: reason: must not be empty",
        ),
        ("memory.read", {"validAt": "yesterday"}, "invalid arguments: validAt: "),
        ("memory.read", {"includeClaimed": None}, "invalid arguments: includeClaimed: "),
        ("memory.confirm", {"factId": u}, f"cannot confirm unknown fact {u}"),
        ("memory.confirm", {"factId": ids["id"]}, f"fact {ids['id']} is already attested"),
        ("memory.confirm", {}, "invalid arguments: factId: required"),
        ("memory.retract", {"factId": u, "reason": "r"}, f"cannot retract unknown fact {u}"),
        ("memory.retract", {"factId": u}, "invalid arguments: reason: required"),
        ("memory.forget", {"factId": u, "reason": "r"}, f"cannot forget unknown fact {u}"),
        (
            "memory.forget",
            {"factId": ids["held"], "reason": "r"},
            f"fact {ids['held']} is on legal hold; release it first",
        ),
        ("memory.hold", {"factId": u, "reason": "r"}, f"cannot hold unknown fact {u}"),
        (
            "memory.hold",
            {"factId": ids["held"], "reason": "r"},
            f"fact {ids['held']} is already on hold",
        ),
        (
            "memory.release",
            {"factId": ids["id"], "reason": "r"},
            f"fact {ids['id']} is not on hold",
        ),
        ("memory.sweep", {"reason": "r", "before": "2026-01-01"}, "invalid arguments: before: "),
        ("memory.get", {"factId": u}, f"unknown fact {u}"),
    ]


def test_error_texts(h: Harness) -> None:
    ids = {"id": h.fact(subject="acct:err"), "held": h.fact(subject="acct:held")}
    h.ok("memory.hold", {"factId": ids["held"], "reason": "legal"})
    wrong = []
    for tool, args, text in _errors(ids):
        result = h.gw(tool, args)
        exact = not text.endswith(": ")
        good = (
            result.is_error
            and len(result.texts) == 1
            and (result.texts[0] == text if exact else result.texts[0].startswith(text))
        )
        if not good:
            wrong.append((tool, args, result.is_error, result.texts, text))
    assert wrong == []


def test_history_of_unknown_id_is_empty(h: Harness) -> None:
    assert h.ok("memory.history", {"factId": "nope"}) == {"events": []}

"""SPEC 4.1 table-driven: who is believed and what a caller may do, over all ten tools.

Direct callers (a direct token, or a call without a receipt) work in quarantine; a reader token
only reads; a space-scoped caller cannot reach another space through any tool argument (a fact
id in another space answers as an unknown id), nor through completions or resources.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from mcp.shared.exceptions import MCPError
from test_spec_tools import AGENT, OBSERVED, RECEIPT, Harness

from agent_custody_state import Ledger
from agent_custody_state.server import completions, resources
from agent_custody_state.server.scopes import SpaceScope
from agent_custody_state.server.service import MemoryService

GATEWAY_REQUIRED = (
    "memory server accepts calls only through the receipts gateway; no receipt id on this call"
)
CONFIRM = (
    "confirmation must come through the receipts gateway; a self-reported caller cannot "
    "lift a fact out of quarantine"
)
HOLD = "legal holds come only through the receipts gateway; a direct call (no receipt) cannot "
SWEEP = "sweeps come only through the receipts gateway; a direct call (no receipt) cannot sweep"
FORGED = {RECEIPT: "forged", AGENT: "forged-agent", OBSERVED: {"crm": 1}}


def _service(tmp_path: Path, **options: Any) -> tuple[MemoryService, Ledger]:
    ledger = Ledger(tmp_path / f"l{len(list(tmp_path.iterdir()))}.jsonl")
    return MemoryService.build(ledger, **options), ledger


@pytest.fixture
def h(tmp_path: Path) -> Iterator[Harness]:
    service, ledger = _service(
        tmp_path, require_gateway=False, identity=Ed25519PrivateKey.generate()
    )
    try:
        yield Harness(service)
    finally:
        service.close()
        ledger.close()


# (who, role, meta): every way of calling without gateway trust
DIRECT = [
    ("direct-token", "direct", FORGED),
    ("stdio-no-receipt", "gateway", {AGENT: "a"}),
    ("stdio-empty-receipt", "gateway", {RECEIPT: "", AGENT: "a"}),
    ("reader-forged", "reader", FORGED),
]


@pytest.mark.parametrize(("who", "role", "meta"), DIRECT, ids=[d[0] for d in DIRECT])
def test_direct_write_is_claimed_and_unsigned(
    h: Harness, who: str, role: str, meta: dict[str, Any]
) -> None:
    args = {"subject": "d", "predicate": "p", "value": 1, "space": "org", "actor": "me"}
    result = h.call("memory.write", args, meta, role)
    if role == "reader":
        assert result.is_error and "may only read" in result.texts[0]
        return
    assert not result.is_error, result.texts
    fact = json.loads(result.texts[0])["fact"]
    # Over stdio the peer is the gateway: its agent is believed (SPEC 4.1), a receipt is not.
    assert fact["provenance"] == "claimed"
    assert fact["actor"] == ("a" if role == "gateway" else "me")
    assert fact["source"] == {"receiptId": None}
    assert "agent-custody/upstream-signature" not in result.meta


def _seed(h: Harness) -> dict[str, str]:
    def write(subject: str, meta: dict[str, Any] | None, role: str = "gateway") -> str:
        args = {"subject": subject, "predicate": "p", "value": 1, "space": "org"}
        result = h.call("memory.write", args, meta, role)
        assert not result.is_error, result.texts
        return str(json.loads(result.texts[0])["fact"]["factId"])

    ids = {
        "attested": write("a", {RECEIPT: "r1", AGENT: "g"}),
        "claimed": write("c", None, "direct"),
        "confirmed": write("f", None, "direct"),
        "gw-claimed": write("k", {RECEIPT: "r2"}),
    }
    h.ok("memory.confirm", {"factId": ids["confirmed"]})
    return ids


def _refused(ids: dict[str, str]) -> list[tuple[str, dict[str, Any], str]]:
    def nc(key: str, prov: str) -> str:
        return (
            f"fact {ids[key]} is {prov}: a direct call (no receipt) may supersede, retract or "
            "forget only claimed facts; this must come through the receipts gateway"
        )

    rows: list[tuple[str, dict[str, Any], str]] = []
    for key, prov in (("attested", "attested"), ("confirmed", "attested")):
        fid = ids[key]
        rows += [
            (
                "memory.write",
                {
                    "subject": "a" if key == "attested" else "f",
                    "predicate": "p",
                    "value": 2,
                    "space": "org",
                    "supersedes": fid,
                },
                nc(key, prov),
            ),
            ("memory.retract", {"factId": fid, "reason": "r"}, nc(key, prov)),
            ("memory.forget", {"factId": fid, "reason": "r"}, nc(key, prov)),
        ]
    for fid in (ids["claimed"], ids["attested"]):
        rows += [
            ("memory.confirm", {"factId": fid}, CONFIRM),
            ("memory.hold", {"factId": fid, "reason": "r"}, HOLD + "place a hold"),
            ("memory.release", {"factId": fid, "reason": "r"}, HOLD + "release a hold"),
        ]
    rows.append(("memory.sweep", {"reason": "r", "before": "2999-01-01T00:00:00Z"}, SWEEP))
    rows.append(("memory.sweep", {}, SWEEP))  # refused before the arguments
    return rows


@pytest.mark.parametrize(("who", "role", "meta"), DIRECT[:3], ids=[d[0] for d in DIRECT[:3]])
def test_direct_refusals_change_nothing(
    h: Harness, who: str, role: str, meta: dict[str, Any]
) -> None:
    ids = _seed(h)
    before = h.service.ledger.count()
    wrong = []
    for tool, args, text in _refused(ids):
        result = h.call(tool, args, meta, role)
        if not (result.is_error and result.texts == [text]):
            wrong.append((tool, args, result.texts))
    assert wrong == []
    assert h.service.ledger.count() == before


def test_direct_may_change_claimed_facts(h: Harness) -> None:
    ids = _seed(h)
    for fid in (ids["claimed"], ids["gw-claimed"]):
        new = h.call(
            "memory.write",
            {
                "subject": "c" if fid == ids["claimed"] else "k",
                "predicate": "p",
                "value": 3,
                "space": "org",
                "supersedes": fid,
            },
            None,
            "direct",
        )
        assert not new.is_error, new.texts
        new_id = json.loads(new.texts[0])["fact"]["factId"]
        assert json.loads(new.texts[0])["fact"]["provenance"] == "claimed"
        retracted = h.call(
            "memory.retract", {"factId": new_id, "reason": "r", "actor": "me"}, None, "direct"
        )
        assert not retracted.is_error and json.loads(retracted.texts[0])["actor"] == "me"
        forgot = h.call("memory.forget", {"factId": fid, "reason": "r"}, FORGED, "direct")
        assert not forgot.is_error, forgot.texts
        assert json.loads(forgot.texts[0])["actor"] == "anonymous"


def test_direct_read_hides_claimed_and_says_so(h: Harness) -> None:
    ids = _seed(h)
    result = h.call("memory.read", {"space": "org"}, FORGED, "direct")
    assert [f["factId"] for f in json.loads(result.texts[0])["facts"]] == [
        ids["attested"],
        ids["confirmed"],
    ]
    assert result.texts[1].startswith("hiddenClaimed: 2 quarantined (claimed) facts left out")
    gw = h.gw("memory.read", {"space": "org"})
    assert len(gw.texts) == 1 and "agent-custody/upstream-signature" in gw.meta
    for tool in ("memory.get", "memory.history"):
        assert not h.call(tool, {"factId": ids["attested"]}, None, "direct").is_error


def test_gateway_requirement(tmp_path: Path) -> None:
    service, ledger = _service(tmp_path)
    h = Harness(service)
    try:
        for role, meta in (
            ("direct", FORGED),
            ("gateway", None),
            ("gateway", {AGENT: "a"}),
            ("reader", FORGED),
            ("gateway", {RECEIPT: 5, AGENT: "a"}),
        ):
            for tool in ("memory.write", "memory.read", "memory.get", "memory.sweep"):
                result = h.call(tool, {}, meta, role)
                assert result.is_error and result.texts == [GATEWAY_REQUIRED], (role, tool)
        # SPEC 4.1: a call without a receipt is refused, whatever tool it names (the original
        # checks the receipt before the tool name).
        assert h.call("memory.x", {}, None, "direct").texts == [GATEWAY_REQUIRED]
        assert h.gw("memory.x", {}).texts == ["unknown tool memory.x"]
        assert not h.gw("memory.read", {}).is_error
    finally:
        service.close()
        ledger.close()


def test_confirm_needs_receipt_and_agent(h: Harness) -> None:
    ids = _seed(h)
    result = h.gw("memory.confirm", {"factId": ids["claimed"]}, **{AGENT: None})
    assert result.is_error and result.texts == [CONFIRM]
    data = h.ok("memory.confirm", {"factId": ids["claimed"]})
    assert data["actor"] == "agent-a" and data["source"]["receiptId"].startswith("rcpt-")


def test_reader_only_reads(h: Harness) -> None:
    ids = _seed(h)
    for tool in (
        "memory.write",
        "memory.confirm",
        "memory.retract",
        "memory.forget",
        "memory.hold",
        "memory.release",
        "memory.sweep",
    ):
        args = {
            "factId": ids["claimed"],
            "reason": "r",
            "subject": "c",
            "predicate": "p",
            "value": 1,
            "space": "org",
            "before": "2999-01-01T00:00:00Z",
        }
        result = h.call(tool, args, FORGED, "reader")
        assert result.is_error, tool
    for tool in ("memory.get", "memory.history"):
        assert not h.call(tool, {"factId": ids["claimed"]}, FORGED, "reader").is_error
    assert not h.call("memory.read", {}, FORGED, "reader").is_error


# --- space scopes -------------------------------------------------------------------------

TEAM = SpaceScope.parse(["team:*"])


def _scoped(
    h: Harness,
    tool: str,
    args: dict[str, Any],
    role: str = "gateway",
    meta: dict[str, Any] | None = None,
) -> Any:
    meta = {RECEIPT: "rs", AGENT: "scoped"} if meta is None and role == "gateway" else meta
    return anyio.run(h.service.call, tool, args, meta, role, TEAM)


def test_scope_cannot_be_bypassed_by_fact_id(h: Harness) -> None:
    org = h.fact(subject="acct:s", space="org")
    claimed = str(
        h.ok(
            "memory.write",
            {"subject": "acct:s", "predicate": "q", "value": 1, "space": "org"},
            **{AGENT: None},
        )["fact"]["factId"]
    )
    h.ok("memory.hold", {"factId": org, "reason": "legal"})
    before = h.service.ledger.count()
    rows = [
        ("memory.get", {"factId": org}, f"unknown fact {org}"),
        ("memory.confirm", {"factId": claimed}, f"cannot confirm unknown fact {claimed}"),
        ("memory.retract", {"factId": org, "reason": "r"}, f"cannot retract unknown fact {org}"),
        ("memory.forget", {"factId": org, "reason": "r"}, f"cannot forget unknown fact {org}"),
        ("memory.hold", {"factId": claimed, "reason": "r"}, f"cannot hold unknown fact {claimed}"),
        ("memory.release", {"factId": org, "reason": "r"}, f"cannot release unknown fact {org}"),
        (
            "memory.write",
            {
                "subject": "acct:s",
                "predicate": "plan",
                "value": 1,
                "space": "team:a",
                "supersedes": org,
            },
            f"cannot supersede unknown fact {org}",
        ),
    ]
    wrong = []
    for tool, args, text in rows:
        for role in ("gateway", "direct"):
            result = _scoped(h, tool, args, role)
            if role == "direct" and tool in ("memory.confirm", "memory.hold", "memory.release"):
                continue  # refused for the role, before any fact is looked at
            if not (result.is_error and result.texts == [text]):
                wrong.append((role, tool, result.texts))
    assert wrong == []
    assert h.service.ledger.count() == before
    assert json.loads(_scoped(h, "memory.history", {"factId": org}).texts[0]) == {"events": []}
    read = _scoped(h, "memory.read", {"subject": "acct:s", "includeClaimed": True})
    assert json.loads(read.texts[0]) == {"facts": []}
    assert read.meta["agent-custody/facts"] == []
    refused = _scoped(h, "memory.read", {"space": "org"})
    assert refused.is_error and "outside this token's scope" in refused.texts[0]
    write = _scoped(
        h, "memory.write", {"subject": "x", "predicate": "p", "value": 1, "space": "org"}
    )
    assert write.is_error and "outside this token's scope" in write.texts[0]


def test_scoped_sweep_and_history_stay_in_scope(h: Harness) -> None:
    org = h.fact(subject="acct:h", space="org")
    team = h.fact(subject="acct:h", space="team:a")
    h.ok(
        "memory.write",
        {"subject": "acct:h", "predicate": "plan", "value": 2, "space": "org", "supersedes": team},
    )
    events = json.loads(_scoped(h, "memory.history", {"factId": team}).texts[0])["events"]
    assert [e["kind"] for e in events] == ["assert"]
    swept = json.loads(
        _scoped(h, "memory.sweep", {"reason": "r", "before": "2999-01-01T00:00:00Z"}).texts[0]
    )
    assert [f["factId"] for f in swept["forgotten"]] == [team]
    assert h.ok("memory.get", {"factId": org})["value"] == "pro"


def test_completions_and_resources_keep_to_scope(h: Harness) -> None:
    ledger = h.service.ledger
    org = h.fact(subject="acct:secret", predicate="salary", space="org")
    team = h.fact(subject="acct:open", predicate="plan", space="team:a")
    for key, expected in (
        ("subject", ["acct:open"]),
        ("predicate", ["plan"]),
        ("space", ["team:a"]),
        ("factId", [team]),
    ):
        got = completions.complete(ledger, key, "", TEAM).completion.values
        assert got == expected, key
    with pytest.raises(MCPError):
        resources.read_resource(ledger, resources.fact_uri(org), TEAM)
    with pytest.raises(MCPError):
        resources.read_resource(ledger, resources.subject_uri("acct:secret"), TEAM)
    with pytest.raises(MCPError):
        resources.read_resource(ledger, resources.HEAD_URI, TEAM)
    listed = [r.uri for r in resources.list_page(ledger, None, TEAM).resources]
    assert listed == [resources.subject_uri("acct:open")]
    body = resources.read_resource(ledger, resources.fact_uri(team), TEAM).contents[0]
    assert org not in body.text  # type: ignore[union-attr]

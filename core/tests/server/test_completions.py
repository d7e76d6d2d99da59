"""``completion/complete`` (issue 13 §2): the resource templates' ``factId`` and ``subject`` and
the tools' ``subject``, ``predicate`` and ``space`` are completed from the ledger's indexes by
prefix, at most 100 values with ``hasMore``/``total``; a forgotten fact's keys are never offered;
anything else gets no values. Over real stdio with the official client, and in process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client

from agent_custody_state import Ledger
from agent_custody_state.server.app import create_memory_server
from agent_custody_state_conformance.gateway import AGENT_KEY, RECEIPT_KEY, GatewayClient

pytestmark = pytest.mark.anyio

FACT = types.ResourceTemplateReference(uri="memory://fact/{factId}")
SUBJECT = types.ResourceTemplateReference(uri="memory://subject/{subject}")
GATEWAY_META: Any = {RECEIPT_KEY: "rcpt-complete", AGENT_KEY: "agent"}


def _tool(name: str) -> types.PromptReference:
    return types.PromptReference(name=name)


async def _values(session: Any, ref: Any, name: str, value: str) -> types.Completion:
    """Complete as the gateway does: with its receipt in ``_meta`` (else refused)."""
    session = getattr(session, "session", session)  # an in-process ``Client``'s session
    params = types.CompleteRequestParams(
        ref=ref, argument=types.CompletionArgument(name=name, value=value), _meta=GATEWAY_META
    )
    request = types.CompleteRequest(params=params)
    return (await session.send_request(request, types.CompleteResult)).completion


async def test_completions_over_stdio(tmp_path: Path) -> None:
    async with GatewayClient.stdio("serve", "--ledger", str(tmp_path / "l.jsonl")) as gw:
        ids = {}
        for subject, predicate, space in [
            ("acct:1", "plan", "team:a"),
            ("acct:10", "plan_b", "team:b"),
            ("acct:2", "tier", "org"),
            ("user:eve", "secret", "user:eve"),
        ]:
            written = await gw.call(
                "memory.write",
                {"subject": subject, "predicate": predicate, "value": "v", "space": space},
            )
            assert not written.is_error, written.text
            ids[subject] = written.data["fact"]["factId"]
        forgotten = await gw.call("memory.forget", {"factId": ids["user:eve"], "reason": "gdpr"})
        assert not forgotten.is_error, forgotten.text
        s = gw.session
        subjects = await _values(s, SUBJECT, "subject", "acct:1")
        assert (subjects.values, subjects.total, subjects.has_more) == (
            ["acct:1", "acct:10"],
            2,
            False,
        )
        assert (await _values(s, _tool("memory.read"), "subject", "")).values == [
            "acct:1",
            "acct:10",
            "acct:2",
        ]
        assert (await _values(s, _tool("memory.read"), "predicate", "pl")).values == [
            "plan",
            "plan_b",
        ]
        assert (await _values(s, _tool("memory.write"), "space", "")).values == [
            "org",
            "team:a",
            "team:b",
        ]
        fact = await _values(s, FACT, "factId", ids["acct:2"][:-1])
        assert fact.values == [ids["acct:2"]]
        # The forgotten fact's subject, predicate, space and id are never offered.
        assert (await _values(s, SUBJECT, "subject", "user")).values == []
        assert (await _values(s, _tool("memory.read"), "predicate", "se")).values == []
        assert (await _values(s, FACT, "factId", ids["user:eve"])).values == []
        # Arguments and references we do not complete: no values, no error.
        for ref, name in [
            (_tool("memory.read"), "includeClaimed"),
            (_tool("memory.get"), "subject"),  # memory.get has no subject argument
            (_tool("test_prompt_with_arguments"), "arg1"),
            (types.ResourceTemplateReference(uri="memory://other/{x}"), "x"),
        ]:
            empty = await _values(s, ref, name, "a")
            assert (empty.values, empty.has_more) == ([], False)


async def test_at_most_100_values_with_has_more(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.jsonl") as ledger:
        for n in range(105):
            ledger.assert_fact(subject=f"s:{n:03d}", predicate="p", value=n, space="org", actor="a")
        server = create_memory_server(ledger)
        try:
            async with Client(server) as client:
                caps = client.server_capabilities
                assert caps is not None and caps.completions is not None
                assert caps.logging is not None
                many = await _values(client, SUBJECT, "subject", "s:")
                assert len(many.values) == 100 and many.has_more and many.total is None
                assert many.values == sorted(many.values) and many.values[0] == "s:000"
                few = await _values(client, SUBJECT, "subject", "s:10")
                assert few.values == [f"s:{n}" for n in range(100, 105)] and few.total == 5
        finally:
            server.close()


async def test_a_scoped_caller_is_offered_only_keys_of_its_spaces(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.jsonl") as ledger:
        for subject, predicate, space in [
            ("acct:1", "plan", "team:a"),
            ("acct:2", "tier", "team:b"),
            ("acct:3", "owner", "user:eve"),
        ]:
            ledger.assert_fact(
                subject=subject, predicate=predicate, value=1, space=space, actor="a"
            )
        server = create_memory_server(ledger, stream_spaces=["team:a", "user:*"])
        try:
            async with Client(server) as client:
                subjects = await _values(client, SUBJECT, "subject", "acct:")
                assert subjects.values == ["acct:1", "acct:3"] and subjects.total == 2
                spaces = await _values(client, _tool("memory.read"), "space", "")
                assert spaces.values == ["team:a", "user:eve"]
                predicates = await _values(client, _tool("memory.write"), "predicate", "")
                assert predicates.values == ["owner", "plan"]
                assert (await _values(client, SUBJECT, "subject", "acct:2")).values == []
        finally:
            server.close()

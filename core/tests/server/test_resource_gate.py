"""Resources, completions and subscriptions pass the gateway requirement as tool calls do.

A server started without ``--allow-direct`` refuses ``resources/list``, ``resources/read``,
``completion/complete`` and ``resources/subscribe`` from a caller it would refuse a tool call
(no believed receipt: a stdio peer sending no receipt ``_meta``, a ``direct`` HTTP token
whatever it sends), with the tool calls' message; the gateway, which puts its receipt in each
request's ``_meta``, reads them as before. Real subprocess servers, the official client.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from servertest import DIRECT_TOKEN, GATEWAY_TOKEN, HttpServer, unique, write

from agent_custody_state.server.trust import GATEWAY_REQUIRED
from agent_custody_state_conformance.gateway import AGENT_KEY, RECEIPT_KEY, GatewayClient

pytestmark = pytest.mark.anyio

GATEWAY_META: Any = {RECEIPT_KEY: "rcpt-resources", AGENT_KEY: "agent"}
FACT_TEMPLATE = types.ResourceTemplateReference(uri="memory://fact/{factId}")


def requests(session: ClientSession, meta: Any, uri: str) -> dict[str, Callable[[], Awaitable]]:
    """Every data-revealing request a client can make, each carrying ``meta`` (or none)."""

    async def complete() -> Any:
        params = types.CompleteRequestParams(
            ref=FACT_TEMPLATE,
            argument=types.CompletionArgument(name="factId", value=""),
            _meta=meta,
        )
        return await session.send_request(
            types.CompleteRequest(params=params), types.CompleteResult
        )

    async def subscribe() -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return await session.subscribe_resource(uri, meta=meta)

    paged = types.PaginatedRequestParams(_meta=meta) if meta else None
    return {
        "resources/list": lambda: session.list_resources(params=paged),
        "resources/read": lambda: session.read_resource(uri, meta=meta),
        "completion/complete": complete,
        "resources/subscribe": subscribe,
    }


async def assert_refused(session: ClientSession, meta: Any, uri: str) -> None:
    for method, request in requests(session, meta, uri).items():
        with pytest.raises(MCPError) as caught:
            await request()
        assert str(caught.value) == GATEWAY_REQUIRED, method


async def assert_served(session: ClientSession, meta: Any, uri: str, fact_id: str) -> None:
    served = requests(session, meta, uri)
    listed = await served["resources/list"]()
    assert uri in [str(r.uri) for r in listed.resources]
    shown = await served["resources/read"]()
    assert fact_id in shown.contents[0].text
    assert fact_id in (await served["completion/complete"]()).completion.values
    await served["resources/subscribe"]()


async def test_stdio_peer_without_receipt_is_refused_resources(tmp_path: Path) -> None:
    async with GatewayClient.stdio("serve", "--ledger", str(tmp_path / "l.jsonl")) as gw:
        subject = unique("acct")
        fact = (await write(gw, subject=subject, value="123-45-6789"))["fact"]
        uri = "memory://subject/" + subject.replace(":", "%3A")
        await assert_refused(gw.session, None, uri)
        # a receipt without an agent passes the requirement, as on a tool call
        await assert_served(gw.session, {RECEIPT_KEY: "rcpt-only"}, uri, fact["factId"])
        await assert_served(gw.session, GATEWAY_META, uri, fact["factId"])
        # an unscoped subscriber gets what a scoped one gets for a resource it cannot read
        with pytest.raises(MCPError) as caught, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await gw.session.subscribe_resource("memory://fact/nope", meta=GATEWAY_META)
        assert str(caught.value) == "Resource not found: memory://fact/nope"


async def test_direct_token_is_refused_resources_even_with_gateway_meta(
    http_server: HttpServer,
) -> None:
    async with GatewayClient.http(http_server.url, token=GATEWAY_TOKEN) as gw:
        subject = unique("acct")
        fact = (await write(gw, subject=subject))["fact"]
        uri = "memory://subject/" + subject.replace(":", "%3A")
        await assert_served(gw.session, GATEWAY_META, uri, fact["factId"])
        await assert_refused(gw.session, None, uri)
    async with GatewayClient.http(http_server.url, token=DIRECT_TOKEN) as direct:
        await assert_refused(direct.session, None, uri)
        await assert_refused(direct.session, GATEWAY_META, uri)


async def test_allow_direct_serves_resources_without_receipt(tmp_path: Path) -> None:
    ledger = str(tmp_path / "l.jsonl")
    async with GatewayClient.stdio("serve", "--ledger", ledger, "--allow-direct") as gw:
        subject = unique("acct")
        claimed = await gw.direct(
            "memory.write", {"subject": subject, "predicate": "p", "value": 1, "space": "org"}
        )
        fact_id = claimed.data["fact"]["factId"]
        uri = "memory://subject/" + subject.replace(":", "%3A")
        await assert_served(gw.session, None, uri, fact_id)
        # quarantined facts are shown, marked as such (docs/decisions.md)
        timeline = json.loads((await gw.session.read_resource(uri)).contents[0].text)
        assert [f["provenance"] for f in timeline["facts"]] == ["claimed"]

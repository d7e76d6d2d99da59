"""A small gateway test client: calls the memory server as the receipts gateway does.

The real gateway (``@agent-custody/receipts``) puts three keys in each tool call's ``_meta``: the
receipt id, the agent of the signed grant, and the facts it fetched for the call. ``GatewayClient``
does the same over an official ``mcp`` ``ClientSession``, so tests (ours, and a third party's
checking a memory server) exercise exactly the gateway's wire::

    async with GatewayClient.stdio("serve", "--ledger", str(path)) as gw:
        result = await gw.call("memory.write", {...}, observed={"crm": {...}})
        assert result.data["fact"]["provenance"] == "verified"

    async with GatewayClient.http(url, token="s3cret") as gw:   # a gateway (or direct) token
        ...

``receipt``/``agent`` default to a fresh receipt id and the client's agent; pass ``None`` to leave
a key out (a call that did not come through the gateway).
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx2
import mcp_types as types
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

RECEIPT_KEY = "agent-custody/receipt"
AGENT_KEY = "agent-custody/agent"
OBSERVED_KEY = "agent-custody/observed"
FACTS_KEY = "agent-custody/facts"
SIGNATURE_KEY = "agent-custody/upstream-signature"


class _Auto:
    def __repr__(self) -> str:
        return "AUTO"


AUTO: Any = _Auto()


@dataclass
class ToolResult:
    """A tool result, unpacked: texts, ``is_error``, ``_meta``, and the first text as JSON."""

    texts: list[str]
    is_error: bool
    meta: dict[str, Any]
    receipt: str | None
    raw: types.CallToolResult = field(repr=False)

    @property
    def text(self) -> str:
        return self.texts[0] if self.texts else ""

    @property
    def data(self) -> Any:
        """The result JSON (for an error with a JSON second item, that item)."""
        for text in reversed(self.texts) if self.is_error else self.texts:
            try:
                return json.loads(text)
            except ValueError:
                continue
        raise ValueError(f"no JSON in the result: {self.texts!r}")

    @property
    def content(self) -> list[dict[str, Any]]:
        """The content items as wire dicts (what a result signature digests)."""
        return [
            c.model_dump(by_alias=True, mode="json", exclude_none=True) for c in self.raw.content
        ]


class GatewayClient:
    """Wraps a ``ClientSession``; ``call`` sets the three ``_meta`` keys as the gateway does."""

    def __init__(self, session: ClientSession, *, agent: str = "test-agent") -> None:
        self.session = session
        self.agent = agent

    async def call(
        self,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        receipt: Any = AUTO,
        agent: Any = AUTO,
        observed: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> ToolResult:
        """Call ``tool``. ``receipt``/``agent``: AUTO (fresh id / the client's agent), a value,
        or None to omit; ``observed``: the gateway's fact lookups; ``meta``: extra raw keys."""
        sent: dict[str, Any] = dict(meta or {})
        receipt_id = f"rcpt-{uuid.uuid4()}" if receipt is AUTO else receipt
        if receipt_id is not None:
            sent[RECEIPT_KEY] = receipt_id
        agent_id = self.agent if agent is AUTO else agent
        if agent_id is not None:
            sent[AGENT_KEY] = agent_id
        if observed is not None:
            sent[OBSERVED_KEY] = dict(observed)
        result = await self.session.call_tool(
            tool,
            dict(arguments or {}),
            meta=sent or None,  # type: ignore[arg-type]
        )
        texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
        return ToolResult(texts, bool(result.is_error), dict(result.meta or {}), receipt_id, result)

    async def direct(self, tool: str, arguments: Mapping[str, Any] | None = None) -> ToolResult:
        """A call with no ``_meta`` at all, as an agent talking to the server directly would."""
        return await self.call(tool, arguments, receipt=None, agent=None)

    async def tool_names(self) -> list[str]:
        return [t.name for t in (await self.session.list_tools()).tools]

    @classmethod
    @asynccontextmanager
    async def stdio(
        cls,
        *args: str,
        command: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        agent: str = "test-agent",
        errlog: Any = None,
        **session_options: Any,
    ) -> AsyncIterator[GatewayClient]:
        """Spawn ``agent-custody-memory <args>`` (by default ``python -m agent_custody_state``)
        and talk to it over stdio, as its gateway. ``session_options`` go to ``ClientSession``
        (``logging_callback``, ``message_handler``, ...)."""
        base = list(command) if command else [sys.executable, "-m", "agent_custody_state"]
        params = StdioServerParameters(
            command=base[0],
            args=[*base[1:], *args],
            env={**os.environ, **(env or {})},
            cwd=cwd,
        )
        async with stdio_client(params, errlog=errlog or sys.stderr) as (read, write):
            async with ClientSession(read, write, **session_options) as session:
                await session.initialize()
                yield cls(session, agent=agent)

    @classmethod
    @asynccontextmanager
    async def http(
        cls,
        url: str,
        *,
        token: str | None = None,
        headers: Mapping[str, str] | None = None,
        agent: str = "test-agent",
        timeout: float = 30,
        **session_options: Any,
    ) -> AsyncIterator[GatewayClient]:
        """Connect to a Streamable HTTP memory server, with a bearer token if given
        (``session_options`` as for ``stdio``)."""
        sent = dict(headers or {})
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        async with httpx2.AsyncClient(headers=sent, timeout=timeout) as http_client:
            async with streamable_http_client(url, http_client=http_client) as (read, write):
                async with ClientSession(read, write, **session_options) as session:
                    await session.initialize()
                    yield cls(session, agent=agent)

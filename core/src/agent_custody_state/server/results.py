"""Tool results as the wire wants them: compact JSON text items, ``isError``, ``_meta``.

Success is one text item holding the JSON (written exactly as ``JSON.stringify`` would, so a
gateway that compares or digests the text sees the TypeScript server's bytes). A refusal is
``isError`` with the reason as text; a half-done removal (the ledger changed, a store did not)
is ``isError`` with the reason first and the result JSON second. Every result also carries
``structuredContent`` (``outputs.py`` holds the schemas): the success JSON, ``{"error", "code"?}``
for a refusal, ``{"error", "partial"}`` for a half-done removal; the text items are unchanged by
it, so the original's gateway, which parses the first text item, reads what it always read, and
a result signature (over the text items) means what it always meant. ``rendered`` and
``rendered_partial`` encode a big result on a worker thread (``limits.render_json``), so one
large read does not hold up every other caller.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

from agent_custody_state.canonical import js_json
from agent_custody_state.server.limits import render_json


@dataclass
class ToolResult:
    """What a handler returns; ``to_mcp()`` builds the SDK's ``CallToolResult``."""

    texts: list[str]
    is_error: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    structured: dict[str, Any] | None = None

    @classmethod
    def ok(cls, data: dict[str, Any], meta: dict[str, Any] | None = None) -> ToolResult:
        return cls([js_json(data)], False, dict(meta or {}), data)

    @classmethod
    def error(cls, message: str, code: str | None = None) -> ToolResult:
        structured: dict[str, Any] = {"error": message}
        if code:
            structured["code"] = code
        return cls([message], True, structured=structured)

    @classmethod
    def partial(cls, message: str, data: dict[str, Any]) -> ToolResult:
        """The operation happened in the ledger but not everywhere: an error with the JSON."""
        return cls([message, js_json(data)], True, structured={"error": message, "partial": data})

    def content(self) -> list[dict[str, Any]]:
        """The content items as wire dicts (what a result signature digests)."""
        return [{"type": "text", "text": text} for text in self.texts]

    def to_mcp(self) -> types.CallToolResult:
        return types.CallToolResult(
            content=[types.TextContent(text=text) for text in self.texts],
            structured_content=self.structured,
            is_error=self.is_error,
            _meta=self.meta or None,
        )


async def rendered(
    data: dict[str, Any],
    meta: dict[str, Any] | None = None,
    *,
    structured: dict[str, Any] | None = None,
) -> ToolResult:
    """``ToolResult.ok``, with a big result encoded off the event loop; ``structured`` when the
    structured content says more than the text (a read's ``hiddenClaimed``)."""
    text = await render_json(data)
    return ToolResult([text], False, dict(meta or {}), data if structured is None else structured)


async def rendered_partial(message: str, data: dict[str, Any]) -> ToolResult:
    """``ToolResult.partial``, with a big result encoded off the event loop."""
    structured = {"error": message, "partial": data}
    return ToolResult([message, await render_json(data)], True, structured=structured)

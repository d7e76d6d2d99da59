"""An agent (a LangGraph graph) that keeps its memory in the custody ledger, over MCP.

The graph has two nodes. ``agent`` decides what to do next for the user's current message;
``memory`` is its tool node, which calls the memory server's ``memory.*`` tools through the
official ``mcp`` client over stdio (the server is spawned as a child process, as any MCP host
does). No language model is involved: ``agent`` is a small deterministic policy, so the example
runs offline and always does the same thing. Replace it with a chat model bound to the same tools
and the memory side does not change.

The agent talks to the server directly, not through the receipts gateway, so the server runs
with ``--allow-direct``: its writes are ``claimed`` (quarantined until a gateway call confirms
them) and its reads ask for them with ``includeClaimed``. When a user corrects a fact, the agent
does not overwrite it: it writes the new value with ``supersedes``, and the ledger keeps both.

    pip install agent-custody-state langgraph
    python examples/langgraph_agent.py                          # a temporary ledger
    python examples/langgraph_agent.py --ledger ledger.sqlite   # keep it; look inside with
    agent-custody-memory export --ledger ledger.sqlite --out -
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any, TypedDict

import mcp_types as types
from langgraph.graph import END, START, StateGraph
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

USER = "user:7"
SPACE = "user:7"
CONVERSATION = [
    "I live in Lisbon.",
    "Where do I live?",
    "I moved to Porto last week.",
    "I live in Porto.",
    "Where do I live?",
]


class AgentState(TypedDict):
    """What flows between the nodes."""

    inbox: list[str]  # the user's messages still to handle, the current one first
    pending: dict[str, Any] | None  # the tool call the agent decided on, for the memory node
    turn: list[dict[str, Any]]  # the calls made for the current message: tool, arguments, result
    replies: list[str]


def understand(message: str) -> tuple[str, str | None]:
    """``("remember", city)`` or ``("recall", None)``: the agent's whole language model."""
    said = re.search(r"\b(?:live in|moved to)\s+([A-Z][\w-]*)", message)
    if said:
        return "remember", said.group(1)
    if re.search(r"\bwhere do i live\b", message, flags=re.I):
        return "recall", None
    raise ValueError(f"this agent does not understand {message!r}")


def agent(state: AgentState) -> dict[str, Any]:
    """Decide the next memory call for the current message, or reply and move on."""
    intent, city = understand(state["inbox"][0])
    calls = state["turn"]
    if not calls:  # always look first: what does memory hold about this now?
        read = {"subject": USER, "predicate": "city", "includeClaimed": True}
        return {"pending": {"tool": "memory.read", "arguments": read}}
    last = calls[-1]
    if last["tool"] == "memory.read":
        known = last["result"]["facts"]
        if intent == "recall":
            answer = f"You live in {known[0]['value']}." if known else "I don't know yet."
            return finish(state, answer)
        if any(fact["value"] == city for fact in known):
            return finish(state, f"I already knew: {city}.")
        write: dict[str, Any] = {
            "subject": USER,
            "predicate": "city",
            "value": city,
            "space": SPACE,
            "actor": "travel-agent",
        }
        if known:  # a correction: the new fact replaces the old one, which the ledger keeps
            write["supersedes"] = known[0]["factId"]
        return {"pending": {"tool": "memory.write", "arguments": write}}
    replaced = last["arguments"].get("supersedes")
    return finish(state, f"Noted: {city}" + (" (it replaces what I had)." if replaced else "."))


def finish(state: AgentState, reply: str) -> dict[str, Any]:
    return {
        "inbox": state["inbox"][1:],
        "pending": None,
        "turn": [],
        "replies": [*state["replies"], reply],
    }


def route(state: AgentState) -> str:
    if state["pending"] is not None:
        return "memory"
    return "agent" if state["inbox"] else END


def build_graph(session: ClientSession) -> Any:
    """The graph; its tool node calls the memory server on ``session``."""

    async def memory(state: AgentState) -> dict[str, Any]:
        call = state["pending"]
        assert call is not None
        result = await session.call_tool(call["tool"], call["arguments"])
        text = next(c.text for c in result.content if isinstance(c, types.TextContent))
        if result.is_error:  # this agent never expects a refusal: stop, saying which
            raise RuntimeError(f"{call['tool']} refused: {text}")
        done = {**call, "result": json.loads(text)}
        return {"pending": None, "turn": [*state["turn"], done]}

    graph = StateGraph(AgentState)
    graph.add_node("agent", agent)
    graph.add_node("memory", memory)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["memory", "agent", END])
    graph.add_edge("memory", "agent")
    return graph.compile()


async def converse(ledger: Path) -> list[str]:
    """Spawn the memory server on ``ledger``, run the conversation through the graph."""
    server = StdioServerParameters(
        command=sys.executable,  # agent-custody-memory, from this same environment
        args=["-m", "agent_custody_state", "serve", "--ledger", str(ledger), "--allow-direct"],
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        graph = build_graph(session)
        start: AgentState = {
            "inbox": list(CONVERSATION),
            "pending": None,
            "turn": [],
            "replies": [],
        }
        final = await graph.ainvoke(start, {"recursion_limit": 100})
    return list(final["replies"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ledger", type=Path, help="ledger to use (default: a temporary one)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="agent-custody-langgraph-") as folder:
        ledger = args.ledger or Path(folder) / "ledger.sqlite"
        replies = asyncio.run(converse(ledger))
    for message, reply in zip(CONVERSATION, replies, strict=True):
        print(f"user:  {message}\nagent: {reply}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``agent-custody-memory demo``: a newcomer's tour, on a temporary ledger, in a few seconds.

It spawns the real server over stdio twice, on the same JSONL ledger: once gateway-only (the
default) and once with ``--allow-direct``, and calls them with the official MCP client exactly
as the receipts gateway would (receipt id and agent in ``_meta``). Each step prints what was
sent and what came back.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from agent_custody_state.cli import demo_checks
from agent_custody_state.cli.common import server_stopped
from agent_custody_state.cli.nextsteps import print_next_steps
from agent_custody_state.server.trust import AGENT_KEY, RECEIPT_KEY


class Painter:
    """ANSI colour when the terminal wants it (``NO_COLOR`` and ``--color`` respected)."""

    def __init__(self, mode: str) -> None:
        if mode == "auto":
            self.on = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        else:
            self.on = mode == "always"

    def __call__(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.on else text


@asynccontextmanager
async def _server(ledger: str, errlog: Any, *extra: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "agent_custody_state", "serve", "--ledger", ledger, *extra],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


class Tour:
    def __init__(self, paint: Painter) -> None:
        self.paint = paint
        self.step = 0
        self.last: Any = None
        self.public_key: Any = None
        self.certificate: Any = None

    def title(self, text: str) -> None:
        self.step += 1
        print("\n" + self.paint("1;36", f"{self.step}. {text}"))

    def say(self, text: str) -> None:
        print("   " + self.paint("2", text))

    async def call(
        self,
        session: ClientSession,
        tool: str,
        args: dict[str, Any],
        *,
        gateway: bool = True,
        show: Any = None,
    ) -> Any:
        meta = {RECEIPT_KEY: f"rcpt-{uuid.uuid4().hex[:8]}", AGENT_KEY: "support-agent"}
        who = (
            f"gateway, receipt {meta[RECEIPT_KEY]}, agent support-agent"
            if gateway
            else "direct, no receipt"
        )
        print(
            "   "
            + self.paint("33", f"→ {tool}")
            + " "
            + json.dumps(args)
            + self.paint("2", f"  ({who})")
        )
        result = await session.call_tool(tool, args, meta=meta if gateway else None)  # type: ignore[arg-type]
        self.last = result
        texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
        if result.is_error:
            print("   " + self.paint("31", "✗ " + texts[0]))
            return None
        data = json.loads(texts[0])
        shown = show(data) if show else data
        print(
            "   "
            + self.paint("32", "✓ ")
            + (shown if isinstance(shown, str) else json.dumps(shown))
        )
        return data


def _facts(data: dict[str, Any]) -> str:
    return (
        ", ".join(
            f"{f['predicate']}={json.dumps(f['value'])} ({f['provenance']})" for f in data["facts"]
        )
        or "(nothing believed)"
    )


def _fact(data: dict[str, Any]) -> str:
    fact = data["fact"]
    stores = ", ".join(sorted(fact.get("external") or {})) or "none"
    return (
        f"fact {fact['factId'][:8]}… {fact['subject']} {fact['predicate']}="
        f"{json.dumps(fact['value'])}, {fact['provenance']}, actor {fact['actor']}; "
        f"stores: {stores}"
    )


async def _tour(ledger: str, tour: Tour, errlog: Any, extra: tuple[str, ...] = ()) -> None:
    # Both servers start at once (spawning is most of the tour's time); each lives in its own
    # task until the tour is over.
    sessions: dict[str, ClientSession] = {}
    both, over = anyio.Event(), anyio.Event()

    async def run(key: str, *extra: str) -> None:
        async with _server(ledger, errlog, *extra) as session:
            sessions[key] = session
            if len(sessions) == 2:
                both.set()
            await over.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "gateway", *extra)
        tg.start_soon(run, "direct", "--allow-direct")
        await both.wait()
        try:
            await _steps(tour, sessions["gateway"], sessions["direct"])
        finally:
            over.set()


async def _steps(tour: Tour, gateway: ClientSession, direct: ClientSession) -> None:
    read = {"subject": "acct:42"}
    tour.title("An attested write: through the gateway, under a signed grant")
    first = await tour.call(
        gateway,
        "memory.write",
        {"subject": "acct:42", "predicate": "plan", "value": "pro", "space": "org"},
        show=_fact,
    )
    tour.title("A read: what the ledger believes now")
    await tour.call(gateway, "memory.read", read, show=_facts)
    tour.title("A correction by supersession: the new value replaces the old")
    second = await tour.call(
        gateway,
        "memory.write",
        {
            "subject": "acct:42",
            "predicate": "plan",
            "value": "enterprise",
            "space": "org",
            "supersedes": first["fact"]["factId"],
        },
        show=_fact,
    )
    await tour.call(gateway, "memory.read", read, show=_facts)
    tour.say("the stores mirror the present: the old value left the store, verified")
    tour.say(
        f"mirror of the superseded fact: {json.dumps(second.get('mirror', {}).get('verification'))}"
    )
    tour.title("A bitemporal read: what the ledger believed before the correction was learned")
    await tour.call(gateway, "memory.read", {**read, "txAt": first["txTime"]}, show=_facts)
    tour.title("A signed result: the server's Ed25519 signature over what it answered")
    demo_checks.check_signature(tour)
    tour.title("A call that did not come through the gateway is refused by default")
    await tour.call(gateway, "memory.read", read, gateway=False)
    tour.title("A direct write (server started with --allow-direct): claimed, quarantined")
    claimed = await tour.call(
        direct,
        "memory.write",
        {
            "subject": "acct:42",
            "predicate": "region",
            "value": "eu",
            "space": "org",
            "actor": "some-script",
        },
        gateway=False,
        show=_fact,
    )
    tour.say("a default read leaves quarantined facts out:")
    await tour.call(gateway, "memory.read", read, show=_facts)
    tour.title("Its confirmation through the gateway lifts it to attested")
    await tour.call(direct, "memory.confirm", {"factId": claimed["fact"]["factId"]}, gateway=False)
    await tour.call(
        gateway,
        "memory.confirm",
        {"factId": claimed["fact"]["factId"]},
        show=lambda d: f"confirmed by {d['actor']}, receipt {d['source']['receiptId']}",
    )
    await tour.call(gateway, "memory.read", read, show=_facts)
    tour.title("A retraction: the correction leaves the present, the old value is back")
    await tour.call(
        gateway,
        "memory.retract",
        {"factId": second["fact"]["factId"], "reason": "wrong account"},
        show=lambda d: f"retracted {d['factId'][:8]}…",
    )
    await tour.call(gateway, "memory.read", read, show=_facts)
    tour.say("the past is kept: the correction's history")
    await tour.call(
        gateway,
        "memory.history",
        {"factId": second["fact"]["factId"]},
        show=lambda d: " → ".join(e["kind"] for e in d["events"]),
    )
    tour.title("A legal hold blocks a forget")
    pro = first["fact"]["factId"]
    await tour.call(
        gateway,
        "memory.hold",
        {"factId": pro, "reason": "litigation 2026-17"},
        show=lambda d: f"{d['kind']} placed",
    )
    await tour.call(gateway, "memory.forget", {"factId": pro, "reason": "customer request"})
    tour.title("Released, then forgotten: the receipt of this call is the certificate")
    await tour.call(
        gateway,
        "memory.release",
        {"factId": pro, "reason": "case closed"},
        show=lambda d: f"{d['kind']}d",
    )
    await tour.call(
        gateway,
        "memory.forget",
        {"factId": pro, "reason": "customer request", "certificate": True},
        show=lambda d: (
            f"erased; {d['digestKind']} digest "
            f"{(d['valueDigest'] or '')[:16]}…, receipt {d['source']['receiptId']}; stores: "
            f"{json.dumps(d['verification'])}"
        ),
    )
    tour.certificate = (tour.last.structured_content or {}).get("certificate")
    await tour.call(
        gateway,
        "memory.get",
        {"factId": pro},
        show=lambda d: (
            f"retracted={d['retracted']}, value gone, forgotten at {d['forgotten']['at']}"
        ),
    )
    tour.say("the store held the value too: removed and verified gone (above)")


def run_demo(*, keep: bool = False, color: str = "auto") -> int:
    paint = Painter(color)
    folder = tempfile.mkdtemp(prefix="agent-custody-demo-")
    try:  # the folder goes whatever stops the tour (a closed pipe, Ctrl-C)
        # The embedded default of a plain install (SQLite); the builtin JSONL file without it.
        from agent_custody_state.plugins import get_plugin_manager
        from agent_custody_state.server.signing import generate_key_pair

        suffix = "sqlite" if "sqlite" in get_plugin_manager().backends else "jsonl"
        ledger = os.path.join(folder, f"ledger.{suffix}")
        key, _public, _kid = generate_key_pair(os.path.join(folder, "server.key"))
        config = os.path.join(folder, "memory.toml")
        with open(config, "w", encoding="utf-8") as fh:
            # The builtin in-process reference store: a write-through store with no vendor.
            fh.write('[[stores]]\nname = "vectors"\ntype = "memory"\n')
        print(
            paint("1", "agent-custody-memory demo")
            + paint(
                "2",
                f": the memory server over stdio, called as the receipts gateway would; "
                f"ledger {ledger}",
            )
        )
        log_path = os.path.join(folder, "servers.log")
        tour = Tour(paint)
        from agent_custody_state.keys import load_public_key

        tour.public_key = load_public_key(str(key) + ".pub")
        with open(log_path, "w", encoding="utf-8") as errlog:
            try:
                anyio.run(_tour, ledger, tour, errlog, ("--config", config, "--key", str(key)))
            except Exception as exc:
                errlog.flush()
                with open(log_path, encoding="utf-8") as fh:
                    log = fh.read()  # the server's own lines, without the blank ones
                    sys.stderr.write("".join(s for s in log.splitlines(True) if s.strip()))
                raise server_stopped(exc, log) from exc
        tour.title("The ledger is tamper-evident: its hash chain verifies after the forget")
        demo_checks.check_chain(ledger, tour)
        tour.title("The forget's signed erasure certificate verifies against the ledger")
        demo_checks.check_certificate(
            ledger, os.path.join(folder, "certificate.json"), tour, keep=keep
        )
        print("\n" + paint("1;32", "done.") + " Every step above is an event in the ledger:")
        from agent_custody_state.ledger.ledger import Ledger

        with Ledger(ledger) as book:
            kinds = [event.kind for event in book.export()]
        print("   " + ", ".join(kinds))
        print_next_steps(paint, ledger, keep=keep)
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
    return 0

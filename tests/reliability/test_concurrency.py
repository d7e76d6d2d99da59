"""Concurrency (issue 7, item 3): 32 HTTP clients, two server processes, one ledger.

Two ``agent-custody-memory serve --http`` processes share one ledger (a SQLite file, or one
PostgreSQL table); 32 clients, half on each server, run a mixed workload for a bounded time on a
small set of subjects, so supersessions collide all the time: read the current value, supersede
it, retract it, confirm, hold and release, forget, get and history. Every answer is classified:
an acknowledged event, a clean refusal with a ledger message (``fact <id> is already
superseded`` and the like), or a failure (anything else: a transport error, an internal error).

Afterwards the ledger's own order (append order, which both backends serialise) is checked as
the one total order of the history:

* every acknowledged event is in it (no lost write);
* transaction times never go backwards along it (so a read "as of" a past instant cannot change
  later: the bitemporal past is stable);
* replaying it, every supersession was legal when it happened (its target current, not
  retracted), and never were there two current values for one subject and predicate, after any
  prefix of the order; reads "as of" sampled past instants agree;
* every refusal a client got was a clean ledger message.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.model import AssertEvent, ForgetEvent, RetractEvent

from .mcpkit import RawMcp, ServerProcess, gateway_meta, http_client
from .support import record, scale

CLIENTS = 32
SUBJECTS = 8
GATEWAY_TOKEN = "gw-" + uuid.uuid4().hex
ENV = {"RELIABILITY_GW_TOKEN": GATEWAY_TOKEN}

#: Refusals that are a correct answer to a race, by the ledger's own words.
CLEAN = re.compile(
    r"^(fact \S+ is already superseded|fact \S+ is retracted|fact \S+ is already retracted"
    r"|fact \S+ is already forgotten|fact \S+ is already on hold|fact \S+ is not on hold"
    r"|fact \S+ is on legal hold; release it first|fact \S+ is already attested"
    r"|cannot \w+ unknown fact \S+|replacement cannot start before the fact it supersedes)$"
)


class Workload:
    """What the clients did, shared by all of them (one event loop, no locking needed)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.acked: list[dict[str, Any]] = []
        self.outcomes: Counter[str] = Counter()
        self.failures: list[str] = []
        self.conflicts = 0
        self.two_current_seen: list[str] = []
        self.two_current_ids: list[list[str]] = []

    def failure(self, what: str) -> None:
        self.outcomes["failure"] += 1
        if len(self.failures) < 20:
            self.failures.append(what)


async def client_loop(
    mcp: RawMcp, work: Workload, subjects: list[str], deadline: float, cid: int
) -> None:
    rng = random.Random(work.rng.random())
    own: list[str] = []  # facts this client wrote in its own scratch subject
    while time.monotonic() < deadline:
        subject = rng.choice(subjects)
        roll = rng.random()
        try:
            if roll < 0.55:
                await supersede_head(mcp, work, subject, rng)
            elif roll < 0.63:
                await act_on_head(mcp, work, subject, "memory.retract", {"reason": "race"})
            elif roll < 0.70:
                result = await mcp.call(
                    "memory.write",
                    {
                        "subject": f"scratch-{cid}",
                        "predicate": f"p{rng.randrange(1000)}",
                        "value": {"n": rng.random()},
                        "space": "team:race",
                        "actor": "c",
                    },
                    gateway_meta(),
                )
                if note(work, "memory.write", result):
                    own.append(json.loads(result["texts"][0])["fact"]["factId"])
            elif roll < 0.75 and own:
                fid = own.pop(rng.randrange(len(own)))
                tool = rng.choice(["memory.forget", "memory.hold", "memory.confirm"])
                args = (
                    {"factId": fid, "reason": "race"}
                    if tool != "memory.confirm"
                    else {"factId": fid}
                )
                result = await mcp.call(tool, args, gateway_meta())
                note(work, tool, result)
                if tool == "memory.hold" and not result.get("isError"):
                    result = await mcp.call(
                        "memory.release", {"factId": fid, "reason": "r"}, gateway_meta()
                    )
                    note(work, "memory.release", result)
            else:
                tool = rng.choice(["memory.read", "memory.get", "memory.history"])
                if tool == "memory.read":
                    await read_head(mcp, work, subject)
                else:
                    head = await read_head(mcp, work, subject)
                    if head is not None:
                        note(work, tool, await mcp.call(tool, {"factId": head}, gateway_meta()))
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            work.failure(f"client {cid}: {type(exc).__name__}: {exc}")


def note(work: Workload, tool: str, result: dict[str, Any]) -> bool:
    """Classify one answer; record acknowledged events. True if it succeeded."""
    if "httpStatus" in result or "rpcError" in result:
        work.failure(f"{tool}: {result}")
        return False
    if result["isError"]:
        text = result["texts"][0] if result["texts"] else ""
        if CLEAN.match(text):
            work.outcomes["refused_cleanly"] += 1
            if text.endswith("is already superseded"):
                work.conflicts += 1
        else:
            work.failure(f"{tool}: unclean refusal: {text[:200]}")
        return False
    work.outcomes["ok"] += 1
    data = json.loads(result["texts"][0])
    if tool == "memory.write":
        work.acked.append(
            {
                "eventId": data["eventId"],
                "kind": "assert",
                "factId": data["fact"]["factId"],
                "supersedes": data["supersedes"],
            }
        )
    elif tool in ("memory.retract", "memory.confirm", "memory.hold", "memory.release"):
        kind = tool.split(".")[1]
        work.acked.append({"eventId": data["eventId"], "kind": kind, "factId": data["factId"]})
    elif tool == "memory.forget":
        work.acked.append({"eventId": None, "kind": "forget", "factId": data["factId"]})
    return True


async def read_head(mcp: RawMcp, work: Workload, subject: str) -> str | None:
    result = await mcp.call(
        "memory.read",
        {"subject": subject, "predicate": "plan", "includeClaimed": True},
        gateway_meta(),
    )
    if not note(work, "memory.read", result):
        return None
    facts = json.loads(result["texts"][0])["facts"]
    if len(facts) > 1:
        work.two_current_seen.append(f"{subject}: {[f['factId'] for f in facts]}")
        work.two_current_ids.append([f["factId"] for f in facts])
    return facts[0]["factId"] if facts else None


async def supersede_head(mcp: RawMcp, work: Workload, subject: str, rng: random.Random) -> None:
    head = await read_head(mcp, work, subject)
    if head is None:
        return
    await asyncio.sleep(rng.random() * 0.01)  # widen the race window a little
    result = await mcp.call(
        "memory.write",
        {
            "subject": subject,
            "predicate": "plan",
            "value": f"v-{uuid.uuid4().hex[:8]}",
            "space": "org",
            "supersedes": head,
        },
        gateway_meta(),
    )
    note(work, "memory.write", result)


async def act_on_head(
    mcp: RawMcp, work: Workload, subject: str, tool: str, args: dict[str, Any]
) -> None:
    head = await read_head(mcp, work, subject)
    if head is not None:
        note(work, tool, await mcp.call(tool, {"factId": head, **args}, gateway_meta()))


async def run_clients(urls: list[str], seconds: float, work: Workload) -> list[str]:
    async with http_client() as http:
        setup = await RawMcp(http, urls[0], GATEWAY_TOKEN).open()
        subjects = []
        for i in range(SUBJECTS):
            subject = f"acct:{i}-{uuid.uuid4().hex[:6]}"
            result = await setup.call(
                "memory.write",
                {"subject": subject, "predicate": "plan", "value": "root", "space": "org"},
                gateway_meta(),
            )
            assert note(work, "memory.write", result), result
            subjects.append(subject)
        clients = [
            await RawMcp(http, urls[i % len(urls)], GATEWAY_TOKEN).open() for i in range(CLIENTS)
        ]
        deadline = time.monotonic() + seconds
        await asyncio.gather(
            *(client_loop(c, work, subjects, deadline, i) for i, c in enumerate(clients))
        )
    return subjects


def effective_superseder(
    fid: str, children: dict[str, list[str]], retracted: set[str]
) -> str | None:
    """SPEC 2.2 rule 4: the first non-retracted superseder, looking through retracted links."""
    for child in children.get(fid, []):
        if child not in retracted:
            return child
        deeper = effective_superseder(child, children, retracted)
        if deeper is not None:
            return deeper
    return None


def check_total_order(location: str, work: Workload, subjects: list[str]) -> dict[str, int]:
    with Ledger(location) as ledger:
        events = list(ledger.export())
        by_id = {e.event_id: e for e in events}
        lost = [a for a in work.acked if a["eventId"] is not None and a["eventId"] not in by_id]
        assert not lost, f"{len(lost)} acknowledged writes lost: {lost[:3]}"
        forgets = {e.fact_id for e in events if isinstance(e, ForgetEvent)}
        lost_forgets = [
            a for a in work.acked if a["kind"] == "forget" and a["factId"] not in forgets
        ]
        assert not lost_forgets, f"acknowledged forgets lost: {lost_forgets[:3]}"

        times = [e.tx_time for e in events]
        backwards = [
            (i, times[i - 1], times[i]) for i in range(1, len(times)) if times[i] < times[i - 1]
        ]
        assert not backwards, (
            f"transaction time goes backwards along the append order at {len(backwards)} "
            f"places, e.g. {backwards[:3]}: a read as of a past instant would change later"
        )

        # Replay in order: each supersession legal when made; never two current values.
        children: dict[str, list[str]] = {}
        retracted: set[str] = set()
        facts: dict[str, AssertEvent] = {}
        current_by_key: dict[tuple[str, str], set[str]] = {}
        tracked = set(subjects)
        replayed = 0
        for event in events:
            if isinstance(event, AssertEvent):
                fact = event.fact
                sup = event.supersedes
                if sup is not None:
                    assert sup in facts, f"{event.event_id} supersedes an unknown fact"
                    assert sup not in retracted, f"{event.event_id} superseded a retracted fact"
                    assert effective_superseder(sup, children, retracted) is None, (
                        f"{event.event_id} superseded {sup}, which was already superseded"
                    )
                    children.setdefault(sup, []).append(fact.fact_id)
                facts[fact.fact_id] = event
            elif isinstance(event, RetractEvent | ForgetEvent):
                retracted.add(event.fact_id)
            else:
                continue
            subject = facts[event.fact_id].fact.subject
            if subject in tracked:
                key = (subject, "plan")
                current = {
                    f
                    for f, e in facts.items()
                    if (e.fact.subject, e.fact.predicate) == key
                    and f not in retracted
                    and effective_superseder(f, children, retracted) is None
                }
                assert len(current) <= 1, f"two current values for {key}: {current}"
                current_by_key[key] = current
                replayed += 1

        # The ledger's own bitemporal reads agree, at sampled past instants.
        rng = random.Random(5)
        samples = rng.sample(times, min(len(times), scale(40, 200)))
        for tx_at in samples:
            for subject in rng.sample(subjects, 2):
                now = ledger.as_of(subject=subject, predicate="plan", tx_at=tx_at)
                assert len(now) <= 1, f"two current values for {subject} as of {tx_at}"
        for subject in subjects:
            assert len(ledger.as_of(subject=subject, predicate="plan")) <= 1
    return {"events": len(events), "replayed_steps": replayed, "past_reads": len(samples) * 2}


def concurrency(location: str, tmp_path: Path) -> None:
    seconds = scale(8, 90)
    args = [
        "--ledger",
        location,
        "--token-env",
        "RELIABILITY_GW_TOKEN",
        "--max-concurrency",
        str(CLIENTS * 2),
    ]
    servers = [ServerProcess(args, ENV), ServerProcess(args, ENV)]
    work = Workload(seed=3)
    try:
        subjects = asyncio.run(run_clients([s.url for s in servers], seconds, work))
        for server in servers:
            assert server.alive(), f"a server died:\n{server.stderr[-3000:]}"
    finally:
        for server in servers:
            server.stop()
    assert not work.failures, (
        f"{work.outcomes['failure']} failures, e.g. {work.failures[:5]}; server logs:\n"
        + "\n".join(s.stderr[-2000:] for s in servers)
    )
    figures = check_total_order(location, work, subjects)
    if work.two_current_seen:
        with Ledger(location) as ledger:
            detail = [ledger.history(fid) for fid in work.two_current_ids[0]]
        raise AssertionError(
            f"a read saw two current values: {work.two_current_seen[:3]}; the history is one "
            f"total order without them, so the read was inconsistent: "
            + "; ".join(json.dumps([e.to_dict() for e in h])[:3000] for h in detail)
        )
    kind = "postgres" if location.startswith("postgres") else "sqlite"
    record(
        f"concurrency[{kind}]",
        clients=CLIENTS,
        servers=2,
        seconds=seconds,
        operations=sum(work.outcomes.values()),
        acknowledged_events=len(work.acked),
        supersession_conflicts_refused=work.conflicts,
        refused_cleanly=work.outcomes["refused_cleanly"],
        failures=0,
        lost_writes=0,
        two_current_values=0,
        **figures,
    )


def test_concurrency_sqlite(tmp_path: Path) -> None:
    pytest.importorskip("agent_custody_state_events_sqlite", reason="events-sqlite not installed")
    concurrency(str(tmp_path / "shared.sqlite"), tmp_path)


@pytest.mark.postgres
def test_concurrency_postgres(tmp_path: Path, postgres_url: str) -> None:
    pytest.importorskip(
        "agent_custody_state_events_postgres", reason="events-postgres not installed"
    )
    concurrency(f"{postgres_url}&table=race", tmp_path)

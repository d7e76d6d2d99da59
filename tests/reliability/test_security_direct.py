"""A direct caller cannot change or destroy gateway memory (issue 11 item 3), on JSONL and SQLite.

* Every refused direct call (retract, forget, supersede of an attested, verified or confirmed
  fact; hold; release; sweep; confirm) is an error result and leaves the ledger's files
  byte-identical, on both file backends, over HTTP with a direct token that forges the
  gateway's ``_meta``.
* The check cannot be raced: two server processes share one SQLite ledger; one confirms claimed
  facts for the gateway while the other forgets the same facts for a direct caller, all at once.
  For every fact exactly one of the two wins, never both (a check made outside the ledger's
  write lock would let a direct caller erase a fact the gateway had just confirmed).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from .mcpkit import RawMcp, ServerProcess, gateway_meta, http_client
from .support import record, scale

GATEWAY = "gw-" + uuid.uuid4().hex
DIRECT = "direct-" + uuid.uuid4().hex
ENV = {"SEC_GW": GATEWAY, "SEC_DIRECT": DIRECT}
SERVE = ["--token-env", "SEC_GW", "--direct-token-env", "SEC_DIRECT", "--allow-direct"]
FORGED = gateway_meta(agent="admin")


def ledger_files(folder: Path) -> dict[str, bytes]:
    """The bytes of the ledger and its sidecars. SQLite's ``-shm`` is left out: it is the WAL's
    shared-memory index, whose read marks every reader rewrites, and holds no data."""
    return {
        p.name: p.read_bytes()
        for p in sorted(folder.iterdir())
        if p.is_file() and not p.name.endswith("-shm")
    }


def _data(out: dict[str, Any]) -> Any:
    assert not out.get("isError") and "texts" in out, out
    return json.loads(out["texts"][0])


async def _seed(gw: RawMcp, direct: RawMcp) -> dict[str, str]:
    base = {"predicate": "plan", "space": "org"}
    ids = {
        "attested": _data(
            await gw.call("memory.write", {**base, "subject": "a", "value": "pro"}, gateway_meta())
        )["fact"]["factId"],
        "verified": _data(
            await gw.call(
                "memory.write",
                {**base, "subject": "v", "value": "pro", "evidence": {"fact": "crm"}},
                gateway_meta(**{"agent-custody/observed": {"crm": "pro"}}),
            )
        )["fact"]["factId"],
        "confirmed": _data(
            await direct.call("memory.write", {**base, "subject": "c", "value": "x"}, FORGED)
        )["fact"]["factId"],
        "held": _data(
            await direct.call("memory.write", {**base, "subject": "h", "value": "x"}, FORGED)
        )["fact"]["factId"],
    }
    _data(await gw.call("memory.confirm", {"factId": ids["confirmed"]}, gateway_meta()))
    _data(await gw.call("memory.hold", {"factId": ids["held"], "reason": "lit"}, gateway_meta()))
    return ids


def _attempts(ids: dict[str, str]) -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    for kind, subject in (("attested", "a"), ("verified", "v"), ("confirmed", "c")):
        fid = ids[kind]
        calls += [
            ("memory.retract", {"factId": fid, "reason": "r", "actor": "reliability-agent"}),
            ("memory.forget", {"factId": fid, "reason": "r"}),
            ("memory.forget", {"factId": fid, "reason": "r", "keepDigest": False}),
            (
                "memory.write",
                {
                    "subject": subject,
                    "predicate": "plan",
                    "space": "org",
                    "value": None,
                    "supersedes": fid,
                    "actor": "reliability-agent",
                },
            ),
            ("memory.hold", {"factId": fid, "reason": "block the gateway's own forget"}),
            ("memory.confirm", {"factId": ids["held"]}),
        ]
    calls += [
        ("memory.release", {"factId": ids["held"], "reason": "free it"}),
        ("memory.sweep", {"reason": "everything", "before": "2999-01-01T00:00:00Z"}),
        (
            "memory.sweep",
            {
                "reason": "everything",
                "before": "2999-01-01T00:00:00Z",
                "space": "org",
                "keepDigest": False,
            },
        ),
    ]
    return calls


@pytest.mark.parametrize("suffix", ["jsonl", "sqlite"])
def test_refused_direct_calls_leave_the_ledger_byte_identical(tmp_path: Path, suffix: str) -> None:
    server = ServerProcess(["--ledger", str(tmp_path / f"ledger.{suffix}"), *SERVE], ENV)

    async def drive() -> int:
        checks = 0
        async with http_client() as http:
            gw = await RawMcp(http, server.url, GATEWAY).open()
            direct = await RawMcp(http, server.url, DIRECT).open()
            ids = await _seed(gw, direct)
            for tool, args in _attempts(ids):
                before = ledger_files(tmp_path)
                out = await direct.call(tool, args, FORGED)
                assert out.get("isError"), (tool, args, out)
                assert ledger_files(tmp_path) == before, f"direct {tool} {args} changed a file"
                checks += 1
            read = _data(await gw.call("memory.read", {"space": "org"}, gateway_meta()))
            assert sorted(f["subject"] for f in read["facts"]) == ["a", "c", "v"]
        return checks

    try:
        checks = asyncio.run(drive())
    finally:
        server.stop()
    record(f"security[direct-refusals {suffix}]", checks=checks, changed_bytes=0)


def test_direct_forget_cannot_race_a_gateway_confirm(tmp_path: Path) -> None:
    ledger = str(tmp_path / "shared.sqlite")
    first = ServerProcess(["--ledger", ledger, *SERVE], ENV)
    second = ServerProcess(["--ledger", ledger, *SERVE], ENV)
    facts = scale(60, 600)

    async def race() -> tuple[int, int]:
        async with http_client() as http:
            gw = await RawMcp(http, first.url, GATEWAY).open()
            direct = await RawMcp(http, second.url, DIRECT).open()
            ids = [
                _data(
                    await direct.call(
                        "memory.write",
                        {"subject": f"s{i}", "predicate": "p", "space": "org", "value": i},
                        FORGED,
                    )
                )["fact"]["factId"]
                for i in range(facts)
            ]
            # Four pairs at a time: each server keeps under its max_concurrency (8), so every
            # call is answered rather than shed with a 503.
            gate = asyncio.Semaphore(4)

            async def pair(fid: str) -> tuple[dict[str, Any], dict[str, Any]]:
                async with gate:
                    confirm, forget = await asyncio.gather(
                        gw.call("memory.confirm", {"factId": fid}, gateway_meta()),
                        direct.call("memory.forget", {"factId": fid, "reason": "r"}, FORGED),
                    )
                    return confirm, forget

            outcomes = await asyncio.gather(*(pair(fid) for fid in ids))
            confirmed = forgotten = 0
            for fid, (confirm, forget) in zip(ids, outcomes, strict=True):
                history = _data(await gw.call("memory.history", {"factId": fid}, gateway_meta()))[
                    "events"
                ]
                kinds = [e["kind"] for e in history]
                assert not ("confirm" in kinds and "forget" in kinds), (fid, kinds)
                assert bool(confirm["isError"]) != bool(forget["isError"]), (confirm, forget)
                confirmed += "confirm" in kinds
                forgotten += "forget" in kinds
            return confirmed, forgotten

    try:
        confirmed, forgotten = asyncio.run(race())
    finally:
        first.stop()
        second.stop()
    assert confirmed + forgotten == facts
    record(
        "security[direct-race]",
        facts=facts,
        confirmed=confirmed,
        forgotten_by_direct=forgotten,
        both=0,
    )

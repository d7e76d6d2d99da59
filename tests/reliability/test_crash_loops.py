"""Crash loops (issue 7, item 1): SIGKILL a writer at many points, reopen, check every promise.

For each backend (JSONL, SQLite, PostgreSQL) a worker process (``crash_worker.py``) writes
through the Ledger and acknowledges each event only after the call returned; the test kills it
again and again, on one ledger that keeps growing across the kills. Two kinds of kill point:

* **syscall**: the LD_PRELOAD shim kills the worker at the k-th write, sync, rename/truncate (or,
  for PostgreSQL, send/recv) of one chosen operation, before the call, after it, or half-way
  through a write. The operations cycle through every write path: assert, supersede, batch
  assert, retract, confirm, hold, release, forget (the JSONL rewrite, SQLite's in-place update
  and WAL truncation, PostgreSQL's VACUUM FULL) and sweep;
* **timer**: the test kills the worker after a random delay, wherever it is (opening the ledger,
  repairing a torn tail, between calls, inside fsync).

After every kill the ledger is reopened and checked: every acknowledged event is present and
unchanged; no half-written event is visible (every event parses, no duplicate ids, a batch is all
there or not at all, no event cites an unknown fact); every fact with a forget event has its value
gone from the ledger's files, and every fact without one still has its full value.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.model import AssertEvent, ForgetEvent, RetractEvent
from agent_custody_state.ledger.verify import verify_lines

from .support import HERE, STRESS, files_under, record, run_planned, scale, scan

OPS = ("forget", "sweep", "supersede", "many", "assert", "retract", "confirm", "hold", "release")
ACTIONS = ("before", "after", "torn")
CLASSES = {"jsonl": 1 | 2 | 4, "sqlite": 1 | 2 | 4, "postgres": 8}


class Zygote:
    """Client of ``crash_worker.py zygote``: fork workers, kill them, reap them."""

    def __init__(self, shim: Path | None, log: Path, script: str = "crash_worker.py") -> None:
        env = dict(os.environ)
        if shim is not None:
            env["LD_PRELOAD"] = str(shim)
            env["ACS_FAULTSHIM"] = str(shim)
        self.log = open(log, "ab")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / script), "zygote"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        ready = self._read(120)
        self.shim = bool(ready["shim"])

    def _read(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise TimeoutError(f"crash zygote silent for {timeout}s")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("crash zygote exited; see its log")
        return json.loads(line)

    def _send(self, cmd: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def run(self, **params: Any) -> int:
        self._send({"cmd": "run", **params})
        return int(self._read(30)["pid"])

    def wait(self, pid: int, timeout: float) -> dict[str, Any]:
        """Reap ``pid``; SIGKILL it first if it has not ended within ``timeout`` (a hang)."""
        self._send({"cmd": "wait", "pid": pid})
        try:
            return self._read(timeout) | {"hung": False}
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            return self._read(30) | {"hung": True}

    def close(self) -> None:
        try:
            self._send({"cmd": "exit"})
            self.proc.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@dataclass
class Knowledge:
    """Everything the acknowledgement file says, accumulated over all workers."""

    values: dict[str, Any] = field(default_factory=dict)
    needles: dict[str, list[bytes]] = field(default_factory=dict)
    acked: list[dict[str, Any]] = field(default_factory=list)
    batches: list[list[str]] = field(default_factory=list)
    offset: int = 0

    def read(self, path: Path) -> list[dict[str, Any]]:
        """Parse lines appended since the last call; returns them."""
        if not path.exists():
            return []
        with open(path, "rb") as fh:
            fh.seek(self.offset)
            data = fh.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        lines = [json.loads(raw) for raw in data[:end].splitlines() if raw.strip()]
        for line in lines:
            if line["t"] == "intent":
                for fid, value in line.get("values", {}).items():
                    self.values[fid] = value
                    self.needles[fid] = [bytes.fromhex(n) for n in line["needles"][fid]]
                if line.get("batch"):
                    self.batches.append(list(line["factIds"]))
            elif line["t"] == "ack":
                self.acked.extend(line["events"])
        return lines


def where_killed(lines: list[dict[str, Any]]) -> str:
    """The operation in flight when the worker died, from its last acknowledgement lines."""
    state = "fork"
    for line in lines:
        t = line["t"]
        if t == "boot":
            state = "open"
        elif t == "start":
            state = "idle"
        elif t in ("intent", "armed"):
            state = line["op"]
        elif t in ("ack", "survived"):
            state = "idle"
    return state


class Backend:
    """How to reach one backend's ledger and the files it owns."""

    def __init__(self, kind: str, tmp: Path, pg: Any = None, pg_url: str | None = None) -> None:
        self.kind = kind
        self.dir = tmp / "ledger"
        self.dir.mkdir()
        self.pg = pg
        if kind == "jsonl":
            self.location = str(self.dir / "ledger.jsonl")
        elif kind == "sqlite":
            self.location = str(self.dir / "ledger.sqlite")
        else:
            assert pg_url is not None
            self.location = f"{pg_url}&table=crash_events"

    def residue(self, needles: list[bytes]) -> dict[bytes, list[str]]:
        """Where bytes of ``needles`` remain in what the ledger owns."""
        if self.kind != "postgres":
            return scan(files_under(self.dir), needles)
        import psycopg

        hits: dict[bytes, list[str]] = {}
        with psycopg.connect(self.location.split("&table=")[0]) as conn:
            for needle in needles:
                text = needle.decode("utf-8")
                row = conn.execute(
                    "SELECT count(*) FROM crash_events WHERE json LIKE %s", (f"%{text}%",)
                ).fetchone()
                if row and row[0]:
                    hits[needle] = ["crash_events (live rows)"]
        return hits

    def dead_versions(self, needles: list[bytes]) -> dict[bytes, list[str]]:
        """PostgreSQL only: needles still in the table's files (dead row versions).

        A forget killed after its commit but before its ``VACUUM FULL`` leaves the old row
        versions in the heap until the next compaction (the live rows are clean, which
        ``residue`` asserts). Counted, not asserted; the final scan asserts they go.
        """
        if self.kind != "postgres" or not needles:
            return {}
        self.pg.checkpoint()
        return scan(files_under(self.pg.database_dir(_database_name(self.location))), needles)


def _database_name(url: str) -> str:
    return url.split("@/", 1)[1].split("?", 1)[0]


def check(ledger: Ledger, known: Knowledge, backend: Backend) -> dict[str, int]:
    """Every promise a reopened ledger must keep after a crash; returns counts for the figures."""
    events = list(ledger.export())
    ids = Counter(e.event_id for e in events)
    dupes = [i for i, n in ids.items() if n > 1]
    assert not dupes, f"duplicate event ids after reopen: {dupes[:3]}"
    by_id = {e.event_id: e for e in events}
    missing = [a for a in known.acked if a["eventId"] not in by_id]
    assert not missing, f"{len(missing)} acknowledged events lost, e.g. {missing[:2]}"
    for ack in known.acked:
        event = by_id[ack["eventId"]]
        assert (event.kind, event.fact_id) == (ack["kind"], ack["factId"]), ack

    asserts = {e.fact_id: e for e in events if isinstance(e, AssertEvent)}
    forgotten = {e.fact_id for e in events if isinstance(e, ForgetEvent)}
    retracted = {e.fact_id for e in events if isinstance(e, RetractEvent | ForgetEvent)}
    for e in events:
        assert e.fact_id in asserts, f"{e.kind} event {e.event_id} cites unknown fact"
    live_superseders = Counter(
        e.supersedes
        for e in events
        if isinstance(e, AssertEvent) and e.supersedes and e.fact_id not in retracted
    )
    assert max(live_superseders.values(), default=0) <= 1, "a fact has two live superseders"

    for batch in known.batches:
        present = sum(fid in asserts for fid in batch)
        assert present in (0, len(batch)), (
            f"batch assert half-applied after a crash: {present} of {len(batch)} facts present"
        )

    erased_needles: list[bytes] = []
    for fid, event in asserts.items():
        fact = event.fact
        if fid in forgotten:
            assert fact.value is None and fact.forgotten is not None, (
                f"fact {fid} has a forget event but its assert was not rewritten"
            )
            erased_needles += known.needles.get(fid, [])
        else:
            assert fact.forgotten is None, f"fact {fid} rewritten without a forget event"
            if fid in known.values:
                assert json.dumps(fact.value) == json.dumps(known.values[fid]), (
                    f"fact {fid}: value changed or half-written: {fact.value!r}"
                )
    hits = backend.residue(erased_needles)
    assert not hits, f"bytes of forgotten values remain after reopen: {hits}"
    return {
        "events": len(events),
        "forgotten": len(forgotten),
        "erased_needles": len(erased_needles),
        "dead_versions": len(backend.dead_versions(erased_needles)),
    }


def plans(kind: str, rng: random.Random, shim: bool) -> Iterator[dict[str, Any]]:
    """Kill plans: syscall kills cycling over every operation and action, and timer kills."""
    combos: list[tuple[str, str]] = []
    for i in itertools.count():
        if shim and i % 3 != 2:
            if not combos:
                # Every (operation, action) pair once per round, in a fresh order each round,
                # forget first so that even a short run kills inside the rewrite.
                combos = [(op, act) for op in OPS for act in ACTIONS]
                rng.shuffle(combos)
                combos.sort(key=lambda c: c[0] != "forget")
                combos.reverse()
            op, action = combos.pop()
            yield {
                "mode": "syscall",
                "op": op,
                "action": action,
                "classes": CLASSES[kind],
                "at": rng.randint(1, 40 if kind != "postgres" else 12),
            }
        else:
            yield {"mode": "timer", "delay": rng.uniform(0.0, 1.2)}


def crash_loop(
    kind: str, tmp_path: Path, faultshim: Path | None, pg: Any = None, pg_url: str | None = None
) -> None:
    kills_wanted = scale(15, 200)
    rng = random.Random(int(os.environ.get("AGENT_CUSTODY_SEED", "7")) + hash(kind) % 1000)
    backend = Backend(kind, tmp_path, pg, pg_url)
    ack = tmp_path / "acks.jsonl"
    zygote = Zygote(faultshim, tmp_path / "zygote.log")
    known = Knowledge()
    kills: Counter[str] = Counter()
    modes: Counter[str] = Counter()
    no_fire = 0
    figures: dict[str, int] = {}
    torn_repaired = 0
    dead_after_kill = 0
    chain_checks = 0
    started = time.monotonic()
    try:
        plan_iter = plans(kind, rng, zygote.shim)
        while sum(kills.values()) < kills_wanted:
            plan = next(plan_iter)
            params = {
                "location": backend.location,
                "ack": str(ack),
                "seed": rng.randrange(2**32),
                "kill": plan,
            }
            status, lines = run_planned(zygote, plan, params, known, ack, tmp_path)
            if status["signal"] != signal.SIGKILL:
                assert status["code"] == 0, f"worker failed ({status}); see zygote.log"
                no_fire += 1  # the shim never reached its call: not a kill point
                continue
            kills[where_killed(lines)] += 1
            modes[plan["mode"]] += 1
            with Ledger(backend.location) as ledger:
                figures = check(ledger, known, backend)
                dead_after_kill += figures["dead_versions"] > 0
                torn_repaired += len(getattr(ledger.backend, "repairs", []))
                # A kill at any write point leaves one valid chain (docs/proofs.md).
                chain = verify_lines(ledger.backend.stored_events())
                assert chain.ok, (
                    f"chain broken after a kill in {where_killed(lines)}: {chain.first}"
                )
                chain_checks += 1
    finally:
        zygote.close()
    final_scan = final_erasure_scan(backend, known, pg)
    record(
        f"crash_loop[{kind}]",
        kill_points=sum(kills.values()),
        by_operation=dict(sorted(kills.items())),
        by_mode=dict(modes),
        acknowledged_events=len(known.acked),
        events_lost=0,
        torn_tails_repaired=torn_repaired,
        kills_leaving_dead_versions=dead_after_kill,
        chain_verified_after_kills=chain_checks,
        ledger_events=figures.get("events", 0),
        forgotten_facts=figures.get("forgotten", 0),
        final_scan_needles=final_scan,
        residue_bytes_found=0,
        shim=zygote.shim,
        seconds=round(time.monotonic() - started, 1),
    )
    if STRESS:
        # Long runs must have killed inside every write path, forget's rewrite included.
        for op in ("forget", "sweep", "assert", "supersede", "many", "retract"):
            assert kills[op] > 0, f"no kill point landed in {op}: {dict(kills)}"


def final_erasure_scan(backend: Backend, known: Knowledge, pg: Any) -> int:
    """After the loop: every forgotten value is gone from the files, PostgreSQL's included."""
    with Ledger(backend.location) as ledger:
        forgotten = {e.fact_id for e in ledger.export() if isinstance(e, ForgetEvent)}
        ledger.compact()
    needles = [n for fid in forgotten for n in known.needles.get(fid, [])]
    if backend.kind == "postgres":
        pg.checkpoint()
        pg.rotate_wal()
        files = [p for p in files_under(pg.data_dir) if "pg_wal" not in p.parts]
        hits = scan(files, needles)
    else:
        hits = scan(files_under(backend.dir), needles)
    assert not hits, f"forgotten values remain on disk: {hits}"
    return len(needles)


def test_crash_loop_jsonl(tmp_path: Path, faultshim: Path | None) -> None:
    crash_loop("jsonl", tmp_path, faultshim)


def test_crash_loop_sqlite(tmp_path: Path, faultshim: Path | None) -> None:
    pytest.importorskip("agent_custody_state_events_sqlite", reason="events-sqlite not installed")
    crash_loop("sqlite", tmp_path, faultshim)


@pytest.mark.postgres
def test_crash_loop_postgres(
    tmp_path: Path, faultshim: Path | None, embedded_postgres: Any, postgres_url: str
) -> None:
    pytest.importorskip(
        "agent_custody_state_events_postgres", reason="events-postgres not installed"
    )
    crash_loop("postgres", tmp_path, faultshim, embedded_postgres, postgres_url)

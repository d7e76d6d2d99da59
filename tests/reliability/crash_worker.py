"""The process the crash loops kill: writes through the Ledger and acknowledges what returned.

Run as ``python crash_worker.py zygote``. The zygote imports the ledger, SQLAlchemy and psycopg
once and then forks one worker per command read from stdin, so a kill point costs a fork, not a
two-second interpreter start. Commands and answers are JSON lines:

* ``{"cmd": "run", ...params}`` → ``{"pid": N}``: fork a worker (parameters below);
* ``{"cmd": "wait", "pid": N}`` → ``{"pid": N, "signal": S | null, "code": C | null}``.

A worker opens the ledger, then runs random ledger operations (asserts, supersessions,
retractions, confirms, holds, releases, forgets, sweeps, batch asserts). Before each call it
appends an *intent* line to the acknowledgement file (what it is about to do, the fact ids it
chose and the byte strings of every value it writes); only after the call has returned does it
append the *ack* line with the event ids the ledger returned. The test reads that file after the
kill: every acked event must be in the reopened ledger.

Kill modes (``kill.mode``):

* ``timer``: the worker runs until the test SIGKILLs it after a random delay;
* ``syscall``: the worker arms the LD_PRELOAD fault shim (``faultshim.c``) around one operation
  of kind ``kill.op`` and the shim SIGKILLs the process at that operation's ``kill.at``-th I/O
  call (before it, after it, or in the middle of a write), so kill points land inside SQLite's
  WAL writes, libpq's COMMIT and the JSONL forget rewrite, not only where Python code runs.

This file is test machinery, not part of the product; the hook lives here, never in the core.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import random
import sys
import traceback
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

ACTIONS = {"before": 0, "after": 1, "torn": 2}
SPACES = ("org", "team:crash", "user:dana")


def make_value(rng: random.Random) -> tuple[Any, list[str]]:
    """A value of a random shape, and the byte strings (hex) a file holding it would contain.

    Every value carries a fresh random marker, so a needle found in a file can only come from
    this value (short or repeated values would match unrelated bytes).
    """
    marker = uuid.uuid4().hex
    shape = rng.randrange(5)
    if shape == 0:
        value: Any = f"str-{marker}"
        needles = [f"str-{marker}"]
    elif shape == 1:
        # 15 digits: exact in a double (the wire numbers are JS doubles), verbatim in the JSON.
        number = rng.randrange(10**14, 9 * 10**14)
        value, needles = number, [str(number)]
    elif shape == 2:
        value = {"plan": {"tier": f"t-{marker}", "seats": [1, 2, {"n": f"n-{marker}"}]}}
        needles = [f"t-{marker}", f"n-{marker}"]
    elif shape == 3:
        value = f"ünïcødé-日本-{marker}-😀"
        needles = [marker, "日本-" + marker]
    else:
        value = [f"l-{marker}", 0.5, None, True, {"k": f"k-{marker}"}]
        needles = [f"l-{marker}", f"k-{marker}"]
    return value, [n.encode("utf-8").hex() for n in needles]


class Worker:
    """One worker process's view: the ledger, the ack file, and what it knows of its facts."""

    def __init__(self, params: dict[str, Any], shim: Any) -> None:
        from agent_custody_state import Ledger

        self.params = params
        self.shim = shim
        self.rng = random.Random(params["seed"])
        self.ack_fd = os.open(params["ack"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if shim is not None:
            shim.acs_ignore_fd(self.ack_fd)
        self.note({"t": "boot", "pid": os.getpid()})
        self.ledger = Ledger(params["location"], **params.get("options", {}))
        self.note({"t": "start", "pid": os.getpid()})
        self._load()

    def note(self, record: dict[str, Any]) -> None:
        # One write() per line, O_APPEND: a line is either in the file or not (the fd is
        # ignored by the shim, and the page cache outlives a SIGKILL).
        os.write(self.ack_fd, (json.dumps(record) + "\n").encode())

    def _load(self) -> None:
        """What exists already (earlier workers wrote it): heads, live facts, holds."""
        ledger = self.ledger
        facts = ledger.facts()
        self.live = {f.fact_id for f in facts if f.forgotten is None}
        self.heads = {
            f.fact_id for f in ledger.as_of(include="all") if not f.space.startswith("sweep-")
        }
        self.claimed = {f.fact_id for f in facts if f.provenance == "claimed"}
        self.held = {f for f in self.live if ledger.held(f)}

    # -- operations ---------------------------------------------------------------------------

    def op_assert(self) -> tuple[dict[str, Any], Any]:
        value, needles = make_value(self.rng)
        fid = str(uuid.uuid4())
        intent = {"factIds": [fid], "needles": {fid: needles}, "values": {fid: value}}
        space = self.rng.choice(SPACES)

        def call() -> list[Any]:
            event = self.ledger.assert_fact(
                subject=f"c-{fid[:8]}",
                predicate="p",
                value=value,
                space=space,
                actor="crash",
                fact_id=fid,
                provenance=self.rng.choice(["claimed", "attested"]),
            )
            self.live.add(fid)
            self.heads.add(fid)
            if event.fact.provenance == "claimed":
                self.claimed.add(fid)
            return [event]

        return intent, call

    def op_supersede(self) -> tuple[dict[str, Any], Any] | None:
        if not self.heads:
            return None
        old = self.rng.choice(sorted(self.heads))
        prev = self.ledger.get(old)
        if prev is None:
            return None
        value, needles = make_value(self.rng)
        fid = str(uuid.uuid4())
        intent = {
            "factIds": [fid],
            "needles": {fid: needles},
            "values": {fid: value},
            "supersedes": old,
        }

        def call() -> list[Any]:
            event = self.ledger.assert_fact(
                subject=prev.subject,
                predicate=prev.predicate,
                value=value,
                space=prev.space,
                actor="crash",
                fact_id=fid,
                supersedes=old,
            )
            self.heads.discard(old)
            self.heads.add(fid)
            self.live.add(fid)
            self.claimed.add(fid)
            return [event]

        return intent, call

    def op_many(self) -> tuple[dict[str, Any], Any]:
        items, needles, values = [], {}, {}
        for _ in range(self.rng.randrange(2, 5)):
            value, n = make_value(self.rng)
            fid = str(uuid.uuid4())
            needles[fid], values[fid] = n, value
            items.append(
                {
                    "subject": f"b-{fid[:8]}",
                    "predicate": "p",
                    "value": value,
                    "space": "org",
                    "actor": "crash",
                    "fact_id": fid,
                }
            )
        intent = {"factIds": list(needles), "needles": needles, "values": values, "batch": True}

        def call() -> list[Any]:
            events = self.ledger.assert_many(items)
            for e in events:
                self.live.add(e.fact_id)
                self.heads.add(e.fact_id)
                self.claimed.add(e.fact_id)
            return events

        return intent, call

    def _pick(self, pool: set[str]) -> str | None:
        return self.rng.choice(sorted(pool)) if pool else None

    def op_retract(self) -> tuple[dict[str, Any], Any] | None:
        fid = self._pick(self.heads)
        if fid is None:
            return None

        def call() -> list[Any]:
            event = self.ledger.retract(fact_id=fid, actor="crash", reason="crash loop")
            self.heads.discard(fid)
            return [event]

        return {"factIds": [fid]}, call

    def op_confirm(self) -> tuple[dict[str, Any], Any] | None:
        fid = self._pick(self.claimed & self.heads)
        if fid is None:
            return None

        def call() -> list[Any]:
            event = self.ledger.confirm(fact_id=fid, actor="crash")
            self.claimed.discard(fid)
            return [event]

        return {"factIds": [fid]}, call

    def op_hold(self) -> tuple[dict[str, Any], Any] | None:
        fid = self._pick(self.live - self.held)
        if fid is None:
            return None

        def call() -> list[Any]:
            event = self.ledger.hold(fact_id=fid, actor="crash", reason="litigation")
            self.held.add(fid)
            return [event]

        return {"factIds": [fid]}, call

    def op_release(self) -> tuple[dict[str, Any], Any] | None:
        fid = self._pick(self.held)
        if fid is None:
            return None

        def call() -> list[Any]:
            event = self.ledger.release(fact_id=fid, actor="crash", reason="settled")
            self.held.discard(fid)
            return [event]

        return {"factIds": [fid]}, call

    def op_forget(self) -> tuple[dict[str, Any], Any] | None:
        fid = self._pick(self.live - self.held)
        if fid is None:
            return None

        def call() -> list[Any]:
            event = self.ledger.forget(fact_id=fid, actor="crash", reason="erasure")
            self.live.discard(fid)
            self.heads.discard(fid)
            return [event]

        return {"factIds": [fid]}, call

    def op_sweep(self) -> tuple[dict[str, Any], Any]:
        # Fill a fresh space first (acknowledged asserts), then sweep it: several forgets and
        # one compaction at the end, the path a retention job takes.
        space = f"sweep-{uuid.uuid4().hex[:8]}"
        for _ in range(self.rng.randrange(2, 4)):
            value, needles = make_value(self.rng)
            fid = str(uuid.uuid4())
            intent = {"factIds": [fid], "needles": {fid: needles}, "values": {fid: value}}
            self._run(
                "assert",
                intent,
                lambda fid=fid, value=value: [
                    self.ledger.assert_fact(
                        subject=f"s-{fid[:8]}",
                        predicate="p",
                        value=value,
                        space=space,
                        actor="crash",
                        fact_id=fid,
                    )
                ],
            )
            self.live.add(fid)
        ids = [
            f.fact_id
            for f in self.ledger.learned_before(datetime.now(UTC) + timedelta(seconds=5), space)
        ]

        def call() -> list[Any]:
            result = self.ledger.sweep(
                before=datetime.now(UTC) + timedelta(seconds=5),
                space=space,
                actor="crash",
                reason="retention",
            )
            for e in result.forgotten:
                self.live.discard(e.fact_id)
            return list(result.forgotten)

        return {"factIds": ids, "space": space}, call

    OPS: ClassVar[dict[str, tuple[Any, int]]] = {
        "assert": (op_assert, 5),
        "supersede": (op_supersede, 4),
        "many": (op_many, 2),
        "retract": (op_retract, 2),
        "confirm": (op_confirm, 1),
        "hold": (op_hold, 1),
        "release": (op_release, 1),
        "forget": (op_forget, 4),
        "sweep": (op_sweep, 2),
    }

    def _run(self, name: str, intent: dict[str, Any], call: Any) -> None:
        self.note({"t": "intent", "op": name, **intent})
        events = call()
        self.note(
            {
                "t": "ack",
                "op": name,
                "events": [
                    {"eventId": e.event_id, "kind": e.kind, "factId": e.fact_id} for e in events
                ],
            }
        )

    def step(self, name: str, armed: dict[str, Any] | None = None) -> bool:
        """Run one operation of kind ``name``; False if it had nothing to work on."""
        made = self.OPS[name][0](self)
        if made is None:
            return False
        intent, call = made
        if armed is None:
            self._run(name, intent, call)
            return True
        self.note({"t": "armed", "op": name, "at": armed["at"], "action": armed["action"]})
        self.shim.acs_arm(armed["at"], ACTIONS[armed["action"]], 0, armed["classes"])
        try:
            self._run(name, intent, call)
        finally:
            count = self.shim.acs_count()
            self.shim.acs_disarm()
        # Still alive: the operation made fewer counted calls than ``at``.
        self.note({"t": "survived", "op": name, "calls": count})
        armed["at"] = self.rng.randint(1, max(count, 1))
        return True

    def run(self) -> int:
        kill = self.params["kill"]
        names = list(self.OPS)
        weights = [self.OPS[n][1] for n in names]
        if kill["mode"] == "timer":
            for _ in range(self.params.get("max_ops", 100_000)):
                self.step(self.rng.choices(names, weights)[0])
            return 0
        # syscall mode: a few random operations first (so the ledger is in a varied state),
        # then the target operation, armed, until the shim has fired.
        for _ in range(self.rng.randrange(0, 4)):
            self.step(self.rng.choices(names, weights)[0])
        armed = dict(kill)
        for _ in range(50):
            if not self.step(kill["op"], armed):
                self.step("assert")  # nothing to work on yet: make something
        self.note({"t": "gave-up", "op": kill["op"]})
        return 0


def _worker_main(params: dict[str, Any], shim: Any) -> int:
    try:
        return Worker(params, shim).run()
    except BaseException:
        traceback.print_exc()
        return 3


def zygote() -> None:
    from agent_custody_state import Ledger  # noqa: F401 - imported once, before forking

    for module in (
        "agent_custody_state_events_sqlite.store",
        "agent_custody_state_events_postgres.store",
        "psycopg",
    ):
        with contextlib.suppress(ImportError):
            __import__(module)
    path = os.environ.get("ACS_FAULTSHIM")
    shim = ctypes.CDLL(path) if path else None
    if shim is not None:
        shim.acs_arm.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_int, ctypes.c_uint]
        shim.acs_count.restype = ctypes.c_long
    out = sys.stdout
    print(json.dumps({"ready": True, "shim": shim is not None}), file=out, flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["cmd"] == "run":
            pid = os.fork()
            if pid == 0:
                # The worker never speaks the zygote protocol: stdin closed, stdout -> stderr.
                os.close(0)
                os.dup2(2, 1)
                os._exit(_worker_main(cmd, shim))
            print(json.dumps({"pid": pid}), file=out, flush=True)
        elif cmd["cmd"] == "wait":
            _, status = os.waitpid(cmd["pid"], 0)
            sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
            code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
            print(
                json.dumps({"pid": cmd["pid"], "signal": sig, "code": code}), file=out, flush=True
            )
        elif cmd["cmd"] == "exit":
            return


if __name__ == "__main__":
    if sys.argv[1:] == ["zygote"]:
        zygote()
    else:
        sys.exit("usage: crash_worker.py zygote")

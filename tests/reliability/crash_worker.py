"""The process the crash loops kill: writes through the Ledger and acknowledges what returned.

Run as ``python crash_worker.py zygote``. The zygote imports the ledger, SQLAlchemy and psycopg
once and then forks one worker per command read from stdin, so a kill point costs a fork, not a
two-second interpreter start. Commands and answers are JSON lines:

* ``{"cmd": "run", ...params}`` → ``{"pid": N}``: fork a worker (parameters below);
* ``{"cmd": "wait", "pid": N}`` → ``{"pid": N, "signal": S | null, "code": C | null}``.

A worker opens the ledger, then runs random ledger operations (``crash_ops.py``: asserts,
supersessions, retractions, confirms, holds, releases, forgets, sweeps, batch asserts). Before
each call it appends an *intent* line to the acknowledgement file (what it is about to do, the
fact ids it chose and the byte strings of every value it writes); only after the call has
returned does it append the *ack* line with the event ids the ledger returned. The test reads
that file after the kill: every acked event must be in the reopened ledger.

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
from typing import Any

# Run as a script (``python crash_worker.py zygote``): this folder is first on sys.path.
from crash_ops import Operations

ACTIONS = {"before": 0, "after": 1, "torn": 2}


class Worker(Operations):
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

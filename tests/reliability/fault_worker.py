"""The process the I/O fault loops run in: one ledger operation per case, with one fault armed.

Run as ``python fault_worker.py`` with the fault shim preloaded (``LD_PRELOAD``) and cases as
JSON lines on stdin; it answers one JSON line per case on stdout. A case names a ledger location,
an operation, and a fault:

* ``{"kind": "shim", "at": N, "classes": mask, "errno": E, "persistent": bool}``: the N-th
  counted I/O call of the operation fails with ``E`` (and, if persistent, every later one, as on
  a disk that has filled up or gone bad);
* ``{"kind": "fsize", "room": K}``: ``RLIMIT_FSIZE`` lets no file grow more than K bytes past
  the ledger's current size, so the kernel itself cuts the write short (a real full disk, with
  real short writes; ``SIGXFSZ`` is ignored so the call fails with EFBIG);
* ``{"kind": "calibrate"}``: no fault, count the operation's I/O calls.

For each case the worker reports what the call did (events returned, or the exception type and
message), then, with the fault disarmed, what a *fresh* ledger on the same location holds (so the
test can tell durable from not), and whether the faulted ledger object still works.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import signal
import sys
import traceback
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from agent_custody_state import Ledger


def _op(ledger: Ledger, name: str, tag: str) -> list[Any]:
    """Run operation ``name`` (creating what it needs first, unfaulted) and return its events."""
    marker = f"v-{uuid.uuid4().hex}"
    if name == "assert":
        return [
            ledger.assert_fact(
                subject=f"f-{tag}", predicate="p", value=marker, space="org", actor="fault"
            )
        ]
    if name == "many":
        return ledger.assert_many(
            [
                {
                    "subject": f"m-{tag}-{i}",
                    "predicate": "p",
                    "value": f"{marker}-{i}",
                    "space": "org",
                    "actor": "fault",
                }
                for i in range(3)
            ]
        )
    raise ValueError(name)


def _prepare(ledger: Ledger, name: str, tag: str) -> Any:
    """Set up what a non-assert operation acts on; returns a zero-argument call."""
    if name in ("assert", "many"):
        return lambda: _op(ledger, name, tag)
    base = ledger.assert_fact(
        subject=f"x-{tag}",
        predicate="p",
        value=f"v-{uuid.uuid4().hex}",
        space=f"space-{tag}",
        actor="fault",
    )
    if name == "supersede":
        return lambda: [
            ledger.assert_fact(
                subject=f"x-{tag}",
                predicate="p",
                value="next",
                space=f"space-{tag}",
                actor="fault",
                supersedes=base.fact_id,
            )
        ]
    if name == "retract":
        return lambda: [ledger.retract(fact_id=base.fact_id, actor="fault", reason="r")]
    if name == "forget":
        return lambda: [ledger.forget(fact_id=base.fact_id, actor="fault", reason="r")]
    if name == "sweep":
        ledger.assert_fact(
            subject=f"y-{tag}", predicate="p", value="w", space=f"space-{tag}", actor="fault"
        )
        before = datetime.now(UTC) + timedelta(seconds=5)
        return lambda: list(
            ledger.sweep(
                before=before, space=f"space-{tag}", actor="fault", reason="retention"
            ).forgotten
        )
    raise ValueError(name)


def _events(location: str) -> dict[str, dict[str, Any]]:
    with Ledger(location) as fresh:
        return {e.event_id: e.to_dict() for e in fresh.export()}


def _size(location: str) -> int:
    path = location.split("?", 1)[0]
    total = 0
    for suffix in ("", "-wal"):
        with contextlib.suppress(OSError):
            total = max(total, os.stat(path + suffix).st_size)
    return total


def run_case(case: dict[str, Any], shim: Any, ledgers: dict[str, Ledger]) -> dict[str, Any]:
    location = case["location"]
    ledger = ledgers.get(location)
    if ledger is None:
        ledger = ledgers[location] = Ledger(location)
    tag = uuid.uuid4().hex[:10]
    call = _prepare(ledger, case["op"], tag)
    before = _events(location)
    fault = case["fault"]
    out: dict[str, Any] = {"case": case}
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if fault["kind"] == "shim":
        shim.acs_arm(fault["at"], 4 if fault["persistent"] else 3, fault["errno"], fault["classes"])
    elif fault["kind"] == "calibrate":
        shim.acs_arm(10**9, 0, 0, fault["classes"])
    elif fault["kind"] == "fsize":
        resource.setrlimit(resource.RLIMIT_FSIZE, (_size(location) + fault["room"], hard))
    try:
        events = call()
        out["ok"] = [e.event_id for e in events]
    except Exception as exc:
        out["error"] = {
            "type": type(exc).__name__,
            "message": str(exc),
            "module": type(exc).__module__,
        }
    finally:
        out["calls"] = shim.acs_count()
        out["fired"] = shim.acs_fired()
        shim.acs_disarm()
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    after = _events(location)
    out["new_events"] = sorted(set(after) - set(before))
    out["changed_events"] = sorted(k for k in before if k in after and after[k] != before[k])
    out["lost_events"] = sorted(set(before) - set(after))
    # The object that saw the fault must keep working once it clears, and then agree with a
    # fresh reader; whatever the failed call left must not have become an event by then.
    try:
        extra = ledger.assert_fact(
            subject=f"after-{tag}", predicate="p", value=1, space="org", actor="fault"
        )
        out["recovered"] = True
    except Exception as exc:
        out["recovered"] = False
        out["recover_error"] = f"{type(exc).__name__}: {exc}"
        ledgers.pop(location, None)
        with contextlib.suppress(Exception):
            ledger.close()
        return out
    final = _events(location)
    out["same_view"] = {e.event_id for e in ledger.export()} == set(final)
    out["final_new"] = sorted(set(final) - set(before) - {extra.event_id})
    return out


def main() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # exceed RLIMIT_FSIZE -> EFBIG, not death
    shim = ctypes.CDLL(os.environ["ACS_FAULTSHIM"])
    shim.acs_arm.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_int, ctypes.c_uint]
    shim.acs_count.restype = ctypes.c_long
    shim.acs_fired.restype = ctypes.c_long
    ledgers: dict[str, Ledger] = {}
    for line in sys.stdin:
        case = json.loads(line)
        try:
            result = run_case(case, shim, ledgers)
        except Exception:
            result = {"case": case, "crashed": traceback.format_exc()}
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()

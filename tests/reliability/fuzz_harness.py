"""The tool fuzzer's harness (tests/reliability/test_fuzz_tools.py): the checks every answer
must pass (``Harness``: clear refusals, unchanged files), the seeded ledger, the fuzzing loop
(schema-derived and hostile calls through Hypothesis, then the hostile matrix), and the raw
JSON-RPC client over stdio with the messages that are not calls at all.
"""

from __future__ import annotations

import json
import os
import random
import reprlib
import select
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hypothesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from .fuzz_inputs import (
    BAD_TIMES,
    HOSTILE_STRINGS,
    HOSTILE_VALUES,
    Ids,
    clear_refusal,
    from_schema,
    hostile_case,
)
from .mcpkit import ServerProcess, encode_json, gateway_meta
from .support import STRESS, digest_files, files_under

SHORT = reprlib.Repr()  # bounded depth and length: hostile arguments nest 50,000 deep
SHORT.maxlevel, SHORT.maxstring, SHORT.maxother, SHORT.maxlist = 4, 120, 120, 6
READ_ONLY = {"memory.read", "memory.get", "memory.history"}


# -- the harness -----------------------------------------------------------------------------------


class Harness:
    """Counts, checks and file hashing shared by the three ways in."""

    def __init__(self, ledger_dir: Path, transport: str) -> None:
        self.dir = ledger_dir
        self.transport = transport
        self.calls = 0
        self.outcomes: Counter[str] = Counter()
        self.hostile = 0
        self.digest = self.snapshot()

    def snapshot(self) -> str:
        # SQLite's -shm is shared memory (read marks change on every read), not ledger data.
        return digest_files([p for p in files_under(self.dir) if not p.name.endswith("-shm")])

    def judge(self, tool: str, args: Any, outcome: dict[str, Any]) -> None:
        self.calls += 1
        where = f"{self.transport} {tool} {SHORT.repr(args)}"
        after = self.snapshot()
        if "rpcError" in outcome:
            error = outcome["rpcError"]
            assert isinstance(error, dict) and error.get("message"), f"{where}: {outcome}"
            assert "Traceback" not in json.dumps(error), f"{where}: {error}"
            self.outcomes["jsonrpc_error"] += 1
            refused = True
        elif "httpStatus" in outcome:
            assert outcome["httpStatus"] in (400, 413), f"{where}: {outcome}"
            self.outcomes[f"http_{outcome['httpStatus']}"] += 1
            refused = True
        elif outcome["isError"]:
            assert clear_refusal(outcome["texts"]), f"{where}: unclear refusal {outcome['texts']}"
            self.outcomes["refused"] += 1
            refused = True
        else:
            for text in outcome["texts"]:
                json.loads(text)
            self.outcomes["ok"] += 1
            refused = False
        if refused or tool in READ_ONLY:
            assert after == self.digest, f"{where}: a refused call or a read changed the files"
        self.digest = after


def seed_ledger(call: Callable[[str, Any, Any], dict[str, Any]], ids: Ids) -> None:
    """Facts in every state for the id-based hostile cases."""

    def write(subject: str, value: Any, **extra: Any) -> str:
        out = call(
            "memory.write",
            {"subject": subject, "predicate": "p", "value": value, "space": "org", **extra},
            gateway_meta(),
        )
        assert not out.get("isError"), out
        return str(json.loads(out["texts"][0])["fact"]["factId"])

    states: dict[str, list[str]] = {
        k: [] for k in ("current", "superseded", "retracted", "forgotten", "held", "claimed")
    }
    for i in range(6):
        a = write(f"seed-{i}", f"a{i}")
        b = write(f"seed-{i}", f"b{i}", supersedes=a)
        states["superseded"].append(a)
        states["current"].append(b)
        c = write(f"gone-{i}", f"c{i}")
        call("memory.retract", {"factId": c, "reason": "seed"}, gateway_meta())
        states["retracted"].append(c)
        d = write(f"erased-{i}", {"secret": i})
        call("memory.forget", {"factId": d, "reason": "seed"}, gateway_meta())
        states["forgotten"].append(d)
        e = write(f"held-{i}", i)
        call("memory.hold", {"factId": e, "reason": "seed"}, gateway_meta())
        states["held"].append(e)
        f = call(
            "memory.write",
            {"subject": f"claimed-{i}", "predicate": "p", "value": i, "space": "org"},
            {"agent-custody/receipt": "r"},
        )
        states["claimed"].append(json.loads(f["texts"][0])["fact"]["factId"])
    ids.by_state = states


def fuzz(
    n: int,
    tools: dict[str, dict[str, Any]],
    call: Callable[[str, Any, Any], Any],
    harness: Harness,
    ids: Ids,
    *,
    in_process: bool,
    seed: int,
) -> None:
    """``n`` calls: about half derived from the schemas by Hypothesis, half hostile."""
    schema_strategies = {name: from_schema(schema) for name, schema in tools.items()}
    id_strategy = st.sampled_from(ids.all())

    def patch_ids(args: Any, data: st.DataObject) -> Any:
        # Schema-valid ids are random strings; half the time use real ones, so calls get past
        # "unknown fact" into the rules.
        if isinstance(args, dict) and data.draw(st.booleans()):
            for key in ("factId", "supersedes"):
                if key in args:
                    args[key] = data.draw(id_strategy)
        return args

    @settings(
        max_examples=n,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @hypothesis.seed(int(os.environ.get("AGENT_CUSTODY_SEED", "7")) * 1000 + seed)
    @given(data=st.data())
    def one(data: st.DataObject) -> None:
        # Every choice is drawn through Hypothesis (a hostile case from a drawn seed), so its
        # view of each example stays consistent.
        if data.draw(st.booleans()):
            name = data.draw(st.sampled_from(list(tools)))
            args = patch_ids(data.draw(schema_strategies[name]), data)
            meta: Any = gateway_meta()
        else:
            case_rng = random.Random(data.draw(st.integers(0, 2**32)) ^ seed)
            name, args, meta = hostile_case(case_rng, tools, ids, in_process)
            harness.hostile += 1
        harness.judge(name, args, call(name, args, meta))

    one()
    if in_process or STRESS:
        hostile_matrix(tools, call, harness, ids, in_process=in_process)


def hostile_matrix(
    tools: dict[str, dict[str, Any]],
    call: Callable[[str, Any, Any], Any],
    harness: Harness,
    ids: Ids,
    *,
    in_process: bool,
) -> None:
    """Every hostile value in every field of every tool, once (the random part may miss one)."""
    base = {
        "subject": "s-matrix",
        "predicate": "p",
        "value": "v",
        "space": "org",
        "reason": "matrix",
        "factId": ids.all()[0],
    }
    values: list[Any] = [*HOSTILE_VALUES, *HOSTILE_STRINGS, *BAD_TIMES]
    for name, schema in tools.items():
        required = {k: base.get(k, "x") for k in schema.get("required", [])}
        for field in schema.get("properties", {}):
            for value in values:
                if not STRESS and isinstance(value, str) and len(value) > 10_000:
                    continue  # the huge ones cost most of the time: long run only
                if not in_process and isinstance(value, str) and len(value) > 1_000_000:
                    value = value[:900_000]  # under the transport limit
                args = {**required, field: value}
                harness.hostile += 1
                harness.judge(name, args, call(name, args, gateway_meta()))


# -- the three ways in ---------------------------------------------------------------------------

#: Messages that are not calls at all: not JSON, not JSON-RPC, a lone surrogate, 50,000 deep.
RAW_MESSAGES = (
    b"not json",
    b"[]",
    b'{"jsonrpc":"2.0","id":9}',
    b"\xff\xfe",
    b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"memory.get",'
    b'"arguments":{"factId":"\\ud800"}}}',
    b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":'
    + b"[" * 50_000
    + b"]" * 50_000
    + b"}",
)


class StdioClient:
    """Raw JSON-RPC lines to ``serve`` over stdio."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.next_id = 1
        self.last: Any = None
        self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "fuzz", "version": "0"},
            },
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: Any, raw: bytes | None = None) -> None:
        stdin = self.server.proc.stdin
        assert stdin is not None
        try:
            stdin.write(raw if raw is not None else encode_json(message) + b"\n")
            stdin.flush()
        except BrokenPipeError:
            self.server.proc.wait(10)
            raise AssertionError(
                f"the stdio server died (exit {self.server.proc.returncode}) after the previous "
                f"call {SHORT.repr(self.last)}:\n{self.server.stderr[-4000:]}"
            ) from None
        self.last = message

    def receive(self, timeout: float = 60) -> dict[str, Any]:
        stdout = self.server.proc.stdout
        assert stdout is not None
        ready, _, _ = select.select([stdout], [], [], timeout)
        assert ready, (
            f"the stdio server did not answer within {timeout}s (hung) to "
            f"{SHORT.repr(self.last)}:\n{self.server.stderr[-3000:]}"
        )
        line = stdout.readline()
        assert line, f"the stdio server exited:\n{self.server.stderr[-3000:]}"
        reply: dict[str, Any] = json.loads(line)
        return reply

    def request(self, method: str, params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            reply = self.receive()
            # One request is in flight at a time, so an error with id null (JSON-RPC's answer
            # when the id cannot be read) is this request's answer too.
            if reply.get("id") == self.next_id or (reply.get("id") is None and "error" in reply):
                return reply

    def call(self, name: str, args: Any, meta: Any) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name, "arguments": args}
        if meta is not None:
            params["_meta"] = meta
        reply = self.request("tools/call", params)
        if "error" in reply:
            return {"rpcError": reply["error"]}
        result = reply["result"]
        return {
            "isError": bool(result.get("isError")),
            "texts": [c.get("text", "") for c in result.get("content", [])],
        }


def list_tools(reply: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t["inputSchema"] for t in reply["result"]["tools"]}

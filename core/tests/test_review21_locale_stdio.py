"""The stdio server when Python's standard streams are ASCII or Latin-1 (twenty-first review).

MCP's stdio transport is UTF-8 whatever the locale: the server reads and writes its pipe as
bytes, so a non-ASCII value written and read back through the official ``mcp`` client arrives
byte-exact (held here). Its log on standard error is text in the locale's encoding: a JSON log
line naming a non-ASCII ledger path was written with Python's ``\\xe9`` escapes, which is not
JSON; it now carries ``\\u00e9``, as JSON does (``cli.textstreams``). The child that computes
a ledger's chain head at start-up (``server.warmup``) read the ledger's location from its stdin
in the locale's encoding, and under ``PYTHONIOENCODING=ascii`` never computed it for a path
that is not ASCII.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from agent_custody_state import Ledger
from agent_custody_state.server import warmup

META = {"agent-custody/receipt": "rcpt-é", "agent-custody/agent": "agent-日本"}
VALUE = "café 日本 😀 \u2028 end"


async def _round_trip(ledger: Path, encoding: str, log: Path) -> tuple[str, str]:
    env = {**os.environ, "LC_ALL": "C", "PYTHONIOENCODING": encoding}
    argv = ["-m", "agent_custody_state", "serve", "--ledger", str(ledger), "--log-format", "json"]
    params = StdioServerParameters(command=sys.executable, args=argv, env=env)
    with log.open("w", encoding="utf-8") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                arguments = {"subject": "user:é", "predicate": "name", "value": VALUE}
                written = await session.call_tool(
                    "memory.write", {**arguments, "space": "org"}, meta=META
                )
                assert not written.is_error, written
                answer = await session.call_tool("memory.read", {"subject": "user:é"}, meta=META)
    text = answer.content[0].text  # type: ignore[union-attr]
    fact = json.loads(text)["facts"][0]
    return fact["value"], fact["actor"]


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_values_round_trip_and_log_lines_stay_json(tmp_path: Path, encoding: str) -> None:
    ledger = tmp_path / "mémoire 日本 😀.jsonl"  # Python's escapes of é and 😀 are not JSON
    log = tmp_path / "stderr.log"
    value, actor = anyio.run(_round_trip, ledger, encoding, log)
    assert (value, actor) == (VALUE, "agent-日本")
    assert VALUE.encode() in ledger.read_bytes()  # the ledger is UTF-8
    lines = log.read_bytes().decode(encoding).splitlines()
    assert lines, "the server logged nothing"
    records = [json.loads(line) for line in lines]  # every line is JSON
    assert any(str(ledger) in record["message"] for record in records), records


@pytest.mark.parametrize("name", ["wärme 日本.jsonl", os.fsdecode(b"bad\xff.jsonl")])
def test_the_start_up_head_is_computed_for_any_path_under_any_locale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    path = tmp_path / name
    with Ledger(path, chain=False) as ledger:  # as the original writes it: no chain record
        ledger.assert_fact(subject="s", predicate="p", value="v", space="org", actor="a")
        expected = ledger.chain_head()
        ledger.backend._computed_head = None
        monkeypatch.setenv("PYTHONIOENCODING", "ascii")  # the child's streams: ASCII
        warmup.Warmup(ledger.backend, str(path)).join(60)
        assert ledger.backend._computed_head is not None
        assert ledger.backend._computed_head[1] == expected

"""The server's log (issue 14.3): one access-log line per tool call (tool, role, outcome,
milliseconds; never values, arguments or tokens), store failures logged on the server, and
``serve --log-level/--log-format`` on a real server's standard error."""

from __future__ import annotations

import io
import json
import logging
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from servertest import GATEWAY_TOKEN, run_cli, start_http, unique
from test_stores import FakeStore

from agent_custody_state import Ledger
from agent_custody_state.cli.logs import configure_logging
from agent_custody_state.server.service import MemoryService
from agent_custody_state_conformance.gateway import GatewayClient

SECRET_VALUE = "s3cret-value-" + unique("v")


def _access(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "agent_custody_state.access"]


def _service(tmp_path: Path, *stores: Any) -> tuple[MemoryService, Ledger]:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    return (
        MemoryService.build(
            ledger,
            require_gateway=False,
            stores=list(stores),
            verify={"attempts": 1, "delay_ms": 0},
        ),
        ledger,
    )


def _call(service: MemoryService, tool: str, args: dict[str, Any]) -> Any:
    return anyio.run(service.call, tool, args, {"receiptId": "r-1"}, "gateway")


WRITE = {"subject": "acct:1", "predicate": "note", "value": SECRET_VALUE, "space": "org"}


def test_one_access_line_per_call_without_values(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agent_custody_state")
    service, ledger = _service(tmp_path)
    try:
        written = _call(service, "memory.write", WRITE)
        fact_id = json.loads(written.texts[0])["fact"]["factId"]
        _call(service, "memory.read", {"subject": "acct:1"})
        _call(service, "memory.write", {"subject": "acct:1"})  # missing arguments
        anyio.run(service.call, "memory.nope\nforged line", {}, None, "direct")
    finally:
        service.close()
        ledger.close()
    lines = _access(caplog)
    assert [(r.tool, r.role, r.outcome) for r in lines] == [  # type: ignore[attr-defined]
        ("memory.write", "gateway", "ok"),
        ("memory.read", "gateway", "ok"),
        ("memory.write", "gateway", "error"),
        ("(unknown tool)", "direct", "error"),
    ]
    assert all(isinstance(r.ms, float) and r.ms >= 0 for r in lines)  # type: ignore[attr-defined]
    text = caplog.text
    assert SECRET_VALUE not in text and "r-1" not in text and fact_id not in text
    assert "forged line" not in text


def test_partial_outcome_and_store_failures_are_logged_on_the_server(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    good, failing = FakeStore("good"), FakeStore("flaky", fail_remove=True)
    service, ledger = _service(tmp_path, good, failing)
    try:
        written = _call(service, "memory.write", WRITE)
        fact_id = json.loads(written.texts[0])["fact"]["factId"]
        retracted = _call(service, "memory.retract", {"factId": fact_id, "reason": "wrong"})
        assert retracted.is_error and len(retracted.texts) == 2
        refusing = FakeStore("quota", refuse_put=True)
        service.stores.stores.append(refusing)
        refused = _call(service, "memory.write", {**WRITE, "subject": "acct:2"})
        assert refused.is_error
    finally:
        service.close()
        ledger.close()
    assert [r.outcome for r in _access(caplog)] == ["ok", "partial", "error"]  # type: ignore[attr-defined]
    stores = [r for r in caplog.records if r.name.startswith("agent_custody_state.stores")]
    messages = [(r.levelname, r.getMessage()) for r in stores]
    assert ("ERROR", f"removing fact {fact_id} from flaky failed: service unavailable") in messages
    assert any(
        level == "WARNING" and m.startswith("store quota refused the write of fact ")
        for level, m in messages
    )
    # The refused write compensates both earlier puts: good's removal works, flaky's fails.
    assert (
        "WARNING",
        f"compensated: fact {_fact_of(messages)} removed again from good",
    ) in messages
    assert any(
        m.startswith("compensation failed: fact ") and " is still in flaky" in m
        for _, m in messages
    )
    assert all(getattr(r, "store", None) for r in stores)
    assert SECRET_VALUE not in caplog.text


def _fact_of(messages: list[tuple[str, str]]) -> str:
    refused = next(m for _, m in messages if m.startswith("store quota refused the write of fact "))
    return refused.removeprefix("store quota refused the write of fact ").split(":")[0]


def test_json_lines_carry_only_the_named_fields() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    level = root.level
    configure_logging("info", "json", stream)
    try:
        logger = logging.getLogger("agent_custody_state.access")
        logger.info(
            "memory.read gateway ok 1.0ms",
            extra={
                "tool": "memory.read",
                "role": "gateway",
                "outcome": "ok",
                "ms": 1.0,
                "value": "x",
            },
        )
        logging.getLogger("httpx").info("HTTP Request: POST https://vendor/")  # not ours: dropped
        logging.getLogger("agent_custody_state.stores.storeset").debug("below the level")
    finally:
        for handler in [h for h in root.handlers if h.get_name() == "agent-custody-memory"]:
            root.removeHandler(handler)
        root.setLevel(level)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert len(lines) == 1
    line = lines[0]
    assert set(line) == {"time", "level", "logger", "message", "tool", "role", "outcome", "ms"}
    assert (line["logger"], line["level"], line["tool"], line["ms"]) == (
        "access",
        "info",
        "memory.read",
        1.0,
    )
    assert line["time"].endswith("Z") and len(line["time"]) == 24


def _wait_for(lines: list[str], predicate: Any, timeout: float = 10) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [line for line in list(lines) if predicate(line)]
        if found:
            return found
        time.sleep(0.05)
    return []


@pytest.mark.anyio
async def test_serve_json_log_on_stderr(tmp_path: Path) -> None:
    server = start_http(
        "--ledger", str(tmp_path / "l.jsonl"), "--token-env", "MEMORY_TOKEN", "--log-format", "json"
    )
    try:
        async with GatewayClient.http(server.url, token=GATEWAY_TOKEN) as gw:
            assert not (await gw.call("memory.write", WRITE)).is_error
            assert (await gw.call("memory.get", {"factId": "nope"})).is_error
        access = _wait_for(
            server.lines, lambda line: '"logger": "access"' in line and "memory.get" in line
        )
    finally:
        server.stop()
    assert access, "".join(server.lines)
    records = [json.loads(line) for line in server.lines if line.startswith("{")]
    calls = [(r["tool"], r["role"], r["outcome"]) for r in records if r["logger"] == "access"]
    assert ("memory.write", "gateway", "ok") in calls and (
        "memory.get",
        "gateway",
        "error",
    ) in calls
    everything = "".join(server.lines)
    assert SECRET_VALUE not in everything and GATEWAY_TOKEN not in everything


@pytest.mark.anyio
async def test_serve_log_level_warning_has_no_access_lines(tmp_path: Path) -> None:
    server = start_http(
        "--ledger",
        str(tmp_path / "l.jsonl"),
        "--token-env",
        "MEMORY_TOKEN",
        "--log-level",
        "warning",
    )
    try:
        async with GatewayClient.http(server.url, token=GATEWAY_TOKEN) as gw:
            assert not (await gw.call("memory.write", WRITE)).is_error
    finally:
        server.stop()
    assert not [line for line in server.lines if " access " in line or '"access"' in line]


def test_bad_log_settings_are_refused_before_anything_is_created(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    for flags in (["--log-level", "loud"], ["--log-format", "xml"]):
        done = run_cli("serve", "--ledger", str(ledger), *flags)
        assert done.returncode == 2 and "invalid choice" in done.stderr
    config = tmp_path / "memory.toml"
    config.write_text(f'ledger = "{ledger.name}"\n[server]\nlog_format = "xml"\n')
    done = run_cli("serve", "--config", str(config))
    assert done.returncode == 1
    assert done.stderr.startswith("error: ") and "server.log_format" in done.stderr
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory.toml"]

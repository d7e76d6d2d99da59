"""MCP logging (issue 13 §2): a store failure and its compensation reach the calling session as
``notifications/message`` at or above the level it set with ``logging/setLevel``, never below,
never before a level is set, and never with a value or a vendor's error text; over real stdio
and real HTTP with the official client, against ``serve --config`` with the builtin store's
outage switch (``fail = true``)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from servertest import GATEWAY_TOKEN, start_http, unique

from agent_custody_state.server.session_log import WITHHELD, mcp_level, shown_message
from agent_custody_state_conformance.gateway import GatewayClient

pytestmark = [
    pytest.mark.anyio,
    # logging/setLevel is deprecated in 2026-07-28 (a per-request level replaces it) but is what
    # 2025-11-25 clients send; the client SDK warns on each call.
    pytest.mark.filterwarnings("ignore:The logging capability is deprecated"),
]

SECRET = "s3cret-" + unique("v")
CONFIG = """
ledger = "{ledger}"

[[stores]]
name = "notes"
type = "memory"

[[stores]]
name = "down"
type = "memory"
fail = true
"""


class Heard:
    """The ``notifications/message`` a session received."""

    def __init__(self) -> None:
        self.messages: list[types.LoggingMessageNotificationParams] = []

    async def __call__(self, params: types.LoggingMessageNotificationParams) -> None:
        self.messages.append(params)

    async def wait(self, count: int, timeout: float = 10) -> None:
        with anyio.move_on_after(timeout):
            while len(self.messages) < count:
                await anyio.sleep(0.02)


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "memory.toml"
    path.write_text(CONFIG.format(ledger=tmp_path / "ledger.jsonl"))
    return path


def _write() -> dict[str, Any]:
    return {"subject": unique("acct"), "predicate": "note", "value": SECRET, "space": "org"}


@asynccontextmanager
async def _stdio(tmp_path: Path, heard: Heard) -> AsyncIterator[GatewayClient]:
    async with GatewayClient.stdio(
        "serve", "--config", str(_config(tmp_path)), logging_callback=heard
    ) as gw:
        yield gw


async def _failed_write(gw: GatewayClient) -> None:
    result = await gw.call("memory.write", _write())
    assert result.is_error and "down" in result.text


def _check_failure_messages(heard: Heard) -> None:
    by_level = {(m.level, m.logger): m.data for m in heard.messages}
    refused = by_level[("warning", "stores.storeset")]
    assert isinstance(refused, dict) and refused["store"] in ("down", "notes")
    messages = [m.data["message"] for m in heard.messages]  # type: ignore[index]
    assert any(
        m.startswith("store down refused the write of fact ") and m.endswith(WITHHELD)
        for m in messages
    ), messages
    assert any(m.startswith("compensated: fact ") and m.endswith(" from notes") for m in messages)
    everything = repr([m.model_dump() for m in heard.messages])
    # Neither the value nor the vendor's own error text reaches the client.
    assert SECRET not in everything and "unavailable" not in everything


async def test_store_failure_reaches_the_session_at_its_level_over_stdio(tmp_path: Path) -> None:
    heard = Heard()
    async with _stdio(tmp_path, heard) as gw:
        await _failed_write(gw)  # no level set yet: nothing
        await anyio.sleep(0.2)
        assert heard.messages == []
        await gw.session.set_logging_level("error")  # the failure is a warning: still nothing
        await _failed_write(gw)
        await anyio.sleep(0.2)
        assert heard.messages == []
        await gw.session.set_logging_level("warning")
        await _failed_write(gw)
        await heard.wait(2)
    _check_failure_messages(heard)
    assert {m.level for m in heard.messages} == {"warning"}


async def test_store_failure_reaches_the_session_over_http(tmp_path: Path) -> None:
    server = start_http("--config", str(_config(tmp_path)), "--token-env", "MEMORY_TOKEN")
    heard, other = Heard(), Heard()
    try:
        async with (
            GatewayClient.http(server.url, token=GATEWAY_TOKEN, logging_callback=heard) as gw,
            GatewayClient.http(server.url, token=GATEWAY_TOKEN, logging_callback=other) as quiet,
        ):
            await gw.session.set_logging_level("debug")
            await quiet.session.set_logging_level("debug")
            await _failed_write(gw)
            await heard.wait(2)
            ok = await quiet.call("memory.read", {"subject": "nobody"})
            assert not ok.is_error
    finally:
        server.stop()
    _check_failure_messages(heard)
    assert other.messages == []  # another session hears nothing of this caller's call


async def test_an_unknown_level_is_refused(tmp_path: Path) -> None:
    async with _stdio(tmp_path, Heard()) as gw:
        with pytest.raises(Exception, match="(?i)invalid|level"):
            await gw.session.send_request(
                types.SetLevelRequest(
                    params=types.SetLevelRequestParams.model_construct(level="loud")
                ),
                types.EmptyResult,
            )


def test_python_levels_map_to_rfc5424_names() -> None:
    assert [mcp_level(n) for n in (5, 10, 20, 25, 30, 40, 50, 55, 60)] == [
        "debug",
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ]


def test_only_the_records_own_keys_and_numbers_are_shown() -> None:
    record = logging.LogRecord(
        "agent_custody_state.stores.storeset",
        logging.ERROR,
        __file__,
        1,
        "fact %s in %s failed after %d checks: %s",
        ("f-1", "mem0", 3, "echo of token abc and value v"),
        None,
    )
    record.store, record.fact = "mem0", "f-1"
    assert shown_message(record, ()) == f"fact f-1 in mem0 failed after 3 checks: {WITHHELD}"
    record.store = "other"
    assert shown_message(record, ()) == f"fact f-1 in {WITHHELD} failed after 3 checks: {WITHHELD}"

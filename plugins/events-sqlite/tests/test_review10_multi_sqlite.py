"""Two ``serve --http`` processes on one SQLite ledger (tenth review): a subscriber on server A
hears a change made through server B (``server/foreign.py``; before, only A's own appends were
announced), and A's own change is announced once. Real subprocess servers, the official client.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

import anyio
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "core" / "tests" / "server"))
from servertest import GATEWAY_TOKEN, start_http, unique, write

from agent_custody_state_conformance.gateway import (
    AGENT_KEY,
    RECEIPT_KEY,
    GatewayClient,
)

pytestmark = pytest.mark.anyio

META: Any = {RECEIPT_KEY: "rcpt-multi", AGENT_KEY: "agent"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def subject_uri(subject: str) -> str:
    return "memory://subject/" + subject.replace(":", "%3A")


async def test_a_subscriber_hears_a_change_made_through_another_server(tmp_path: Path) -> None:
    args = ("--ledger", str(tmp_path / "l.sqlite"), "--token-env", "MEMORY_TOKEN")
    a = start_http(*args)
    b = start_http(*args)
    heard: list[str] = []
    changed = [anyio.Event()]

    async def on_message(message: Any) -> None:
        if getattr(message, "method", None) == "notifications/resources/updated":
            heard.append(str(message.params.uri))
            changed[0].set()

    async def wait_for(uri: str) -> None:
        with anyio.fail_after(5):
            while uri not in heard:
                changed[0] = anyio.Event()
                await changed[0].wait()

    try:
        async with (
            GatewayClient.http(a.url, token=GATEWAY_TOKEN, message_handler=on_message) as ga,
            GatewayClient.http(b.url, token=GATEWAY_TOKEN) as gb,
        ):
            here, there = unique("acct"), unique("acct")
            for subject in (here, there):
                await write(ga, subject=subject)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    await ga.session.subscribe_resource(subject_uri(subject), meta=META)
            await write(ga, subject=here, value="through A")
            await wait_for(subject_uri(here))
            await write(gb, subject=there, value="through B")
            await wait_for(subject_uri(there))
            assert heard.count(subject_uri(here)) == 1, heard
            assert heard.count(subject_uri(there)) == 1, heard
    finally:
        a.stop()
        b.stop()

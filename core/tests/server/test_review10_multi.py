"""Several ``serve --http`` processes on one JSONL ledger (tenth review): real subprocess
servers, the official MCP client.

- A subscriber on server A hears a change made through server B (``server/foreign.py``): before,
  only appends made in A's own process were announced, although A declared subscriptions.
- A change made through A itself is announced once, not again by the watcher.
- The same on a 2026-07-28 ``subscriptions/listen`` stream, and for a stdio server sharing the
  ledger with an HTTP one.
- Probed and correct, kept as regressions: a supersession race across the two servers has one
  winner and a clean ``already superseded`` loser; a forget on A is never served as a value by
  B; ``memory://ledger/head`` is the same on both; both keep their certificates in one folder,
  one file per forgotten fact, each verifying against the ledger.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from servertest import GATEWAY_TOKEN, HttpServer, run_cli, start_http, unique, write

from agent_custody_state_conformance.gateway import AGENT_KEY, RECEIPT_KEY, GatewayClient

pytestmark = pytest.mark.anyio

META: Any = {RECEIPT_KEY: "rcpt-multi", AGENT_KEY: "agent"}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("multi")


@pytest.fixture(scope="module")
def pair(folder: Path, keys: tuple[Path, Path]) -> Iterator[tuple[HttpServer, HttpServer]]:
    """Two HTTP servers on one JSONL ledger, keeping certificates in one folder."""
    args = (
        "--ledger",
        str(folder / "l.jsonl"),
        "--token-env",
        "MEMORY_TOKEN",
        "--key",
        str(keys[0]),
        "--certificates",
        str(folder / "certs"),
        "--allow-direct",  # a listen stream carries no receipt
    )
    a = start_http(*args)
    try:
        b = start_http(*args)
    except BaseException:
        a.stop()
        raise
    yield a, b
    a.stop()
    b.stop()


class Heard:
    """The ``notifications/resources/updated`` a client received, awaitable by URI."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self.changed = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if getattr(message, "method", None) == "notifications/resources/updated":
            self.uris.append(str(message.params.uri))
            self.changed.set()

    async def wait_for(self, uri: str, seconds: float = 5) -> None:
        with anyio.fail_after(seconds):
            while uri not in self.uris:
                self.changed = anyio.Event()
                await self.changed.wait()


def subject_uri(subject: str) -> str:
    return "memory://subject/" + subject.replace(":", "%3A")


@pytest.fixture
async def clients(
    pair: tuple[HttpServer, HttpServer],
) -> AsyncIterator[tuple[GatewayClient, GatewayClient, Heard]]:
    heard = Heard()
    a, b = pair
    async with (
        GatewayClient.http(a.url, token=GATEWAY_TOKEN, message_handler=heard) as ga,
        GatewayClient.http(b.url, token=GATEWAY_TOKEN) as gb,
    ):
        yield ga, gb, heard


async def subscribe(gw: GatewayClient, uri: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        await gw.session.subscribe_resource(uri, meta=META)


async def test_a_subscriber_on_one_server_hears_a_change_made_through_another(
    clients: tuple[GatewayClient, GatewayClient, Heard],
) -> None:
    ga, gb, heard = clients
    here, there = unique("acct"), unique("acct")
    await write(ga, subject=here)
    await write(ga, subject=there)
    await subscribe(ga, subject_uri(here))
    await subscribe(ga, subject_uri(there))
    # through A: heard at the end of A's own call
    await write(ga, subject=here, value="through A")
    await heard.wait_for(subject_uri(here), seconds=2)
    # through B: heard by A's subscriber (was never heard)
    await write(gb, subject=there, value="through B")
    await heard.wait_for(subject_uri(there))
    # A's own change was announced once, not a second time when A's watcher saw it
    assert heard.uris.count(subject_uri(here)) == 1, heard.uris
    assert heard.uris.count(subject_uri(there)) == 1, heard.uris


async def test_a_listen_stream_hears_a_change_made_through_another_server(
    pair: tuple[HttpServer, HttpServer],
) -> None:
    a, b = pair
    subject = unique("acct")
    auth = {"Authorization": f"Bearer {GATEWAY_TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=auth, timeout=30) as http,
        Client(streamable_http_client(a.url, http_client=http)) as client,
        GatewayClient.http(b.url, token=GATEWAY_TOKEN) as gb,
    ):
        assert client.protocol_version == "2026-07-28"
        async with client.listen(resource_subscriptions=[subject_uri(subject)]) as sub:
            events = aiter(sub)
            await write(gb, subject=subject)
            with anyio.fail_after(5):
                assert (await anext(events)).uri == subject_uri(subject)  # type: ignore[union-attr]


async def test_a_stdio_server_hears_a_change_made_through_an_http_server(
    pair: tuple[HttpServer, HttpServer], folder: Path
) -> None:
    heard = Heard()
    subject = unique("acct")
    async with (
        GatewayClient.stdio(
            "serve", "--ledger", str(folder / "l.jsonl"), message_handler=heard
        ) as gs,
        GatewayClient.http(pair[0].url, token=GATEWAY_TOKEN) as ga,
    ):
        await write(gs, subject=subject)
        await subscribe(gs, subject_uri(subject))
        await write(ga, subject=subject, value="through HTTP")
        await heard.wait_for(subject_uri(subject))


async def test_two_servers_race_forget_and_certify_on_one_ledger(
    clients: tuple[GatewayClient, GatewayClient, Heard],
    folder: Path,
    keys: tuple[Path, Path],
) -> None:
    ga, gb, _ = clients
    base = (await write(ga, value="v0"))["fact"]

    async def supersede(gw: GatewayClient, value: str, out: list[Any]) -> None:
        args = {"subject": base["subject"], "predicate": "plan", "space": "org"}
        out.append(
            await gw.call("memory.write", {**args, "value": value, "supersedes": base["factId"]})
        )

    results: list[Any] = []
    async with anyio.create_task_group() as group:
        group.start_soon(supersede, ga, "a", results)
        group.start_soon(supersede, gb, "b", results)
    assert sorted(r.is_error for r in results) == [False, True]
    loser = next(r for r in results if r.is_error)
    assert loser.texts == [f"fact {base['factId']} is already superseded"]

    secret = unique("secret")
    fact = (await write(gb, value=secret))["fact"]["factId"]
    assert secret in (await ga.call("memory.get", {"factId": fact})).texts[0]
    done = await ga.call("memory.forget", {"factId": fact, "reason": "erasure"})
    assert not done.is_error, done.texts
    shown = await gb.call("memory.get", {"factId": fact})
    assert secret not in shown.texts[0] and "forgotten" in json.loads(shown.texts[0])

    more = [(await write(ga, value=unique("v")))["fact"]["factId"] for _ in range(4)]
    forgets: list[Any] = []

    async def forget(gw: GatewayClient, fact_id: str) -> None:
        forgets.append(await gw.call("memory.forget", {"factId": fact_id, "reason": "r"}))

    async with anyio.create_task_group() as group:
        for i, fact_id in enumerate(more):
            group.start_soon(forget, ga if i % 2 else gb, fact_id)
    assert not any(r.is_error for r in forgets), [r.texts for r in forgets]

    heads = [
        (await gw.session.read_resource("memory://ledger/head", meta=META)).contents[0].text  # type: ignore[union-attr]
        for gw in (ga, gb)
    ]
    assert heads[0] == heads[1]

    kept = sorted(p.stem for p in (folder / "certs").glob("*.json"))
    assert set(kept) >= {fact, *more}
    for fact_id in (fact, *more):
        checked = run_cli(
            "certificate",
            "verify",
            str(folder / "certs" / f"{fact_id}.json"),
            "--key",
            str(keys[1]),
            "--ledger",
            str(folder / "l.jsonl"),
        )
        assert checked.returncode == 0, (checked.stdout, checked.stderr)

"""Review 6: the server as a long-running process, and the flows under a stop's cancel.

- A write-through flow ran under an anyio shield, which asyncio's own cancel (``task.cancel()``,
  ``wait_for``, uvicorn's cancel of a request after a stop's grace) goes through: a write was
  cut between two stores' puts (a fact in a store that no ledger records, which no outbox
  entry names), a forget or a sweep between the ledger and the stores (the erased value still
  served without an outbox). The flow now finishes in a task of its own, within a bound.
- Per-client state grew for the server's life: a listen bus per space scope, a user object and
  a session book per OAuth principal, a log level per connection (and a later connection given
  the same ``id`` inherited it). Each now leaves with its owner.
- A legacy subscriber that stopped reading held up every tool call that changed what it
  subscribed to (its notifications were sent in the caller's path, unbounded).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from servertest import HEADERS, post
from test_review5_lifecycle import META, SlowStore
from test_review5_resources import BASE, call, server_on, subscribe

from agent_custody_state import AssertRequest, Ledger, serve_memory_http
from agent_custody_state.ledger.model import Fact
from agent_custody_state.server import app as app_module
from agent_custody_state.server import drain, notify, resources
from agent_custody_state.server.oauth import OAuthSettings
from agent_custody_state.server.scopes import scope_arg
from agent_custody_state.server.sessions import SessionLimiter
from agent_custody_state.stores import finish
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore
from agent_custody_state_conformance.issuer import DEFAULT_ISSUER, LocalIssuer

pytestmark = pytest.mark.anyio
AUDIENCE = "http://127.0.0.1/mcp"


class Stalls(InProcessStore):
    """A store whose next put or remove (``at``) waits at ``go`` and says when it got there."""

    def __init__(self, name: str, at: str) -> None:
        super().__init__(name)
        self.at, self.reached, self.go = at, asyncio.Event(), asyncio.Event()

    async def _stall(self, step: str) -> None:
        if step == self.at:
            self.at = ""
            self.reached.set()
            await self.go.wait()

    async def put(self, fact: Fact) -> str:
        await self._stall("put")
        return await super().put(fact)

    async def remove(self, external_id: str, fact: Fact) -> None:
        await self._stall("remove")
        await super().remove(external_id, fact)


async def until(condition: Callable[[], bool]) -> None:
    """Wait (at most 5 s) for what the server does after the client has moved on."""
    with anyio.fail_after(5):
        while not condition():
            await anyio.sleep(0.01)


def held(store: InProcessStore) -> list[str]:
    return sorted(r["metadata"]["factId"] for r in store.vendor.rows.values())


def request(value: Any) -> AssertRequest:
    return AssertRequest(subject="s", predicate="p", value=value, space="org", actor="agent")


async def cut(flow: Callable[[], Any], store: Stalls) -> None:
    """Run ``flow`` in a task, cancel that task (asyncio's own cancel) once ``store`` stalls,
    then let the store go on; return once the flow's task has ended."""
    task = asyncio.ensure_future(flow())
    with anyio.fail_after(5):
        await store.reached.wait()
    task.cancel()
    await asyncio.sleep(0)
    store.go.set()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.parametrize("kind", ["write", "forget", "sweep"])
async def test_a_flow_outlives_its_callers_asyncio_cancel(kind: str) -> None:
    fast, slow = InProcessStore("fast"), Stalls("slow", "put" if kind == "write" else "remove")
    with Ledger("memory:") as ledger:
        custody = Custody(ledger, [fast, slow])
        if kind == "write":
            await cut(lambda: custody.write(request("v")), slow)
            recorded = [f.fact_id for f in ledger.facts()]
            assert held(fast) == held(slow) == recorded and len(recorded) == 1
            return
        fact = (await custody.write(request("v"))).event.fact
        if kind == "forget":
            await cut(lambda: custody.forget(fact_id=fact.fact_id, actor="a", reason="r"), slow)
        else:
            await asyncio.sleep(0.01)  # the fact was learned before the cutoff, strictly
            before = ledger.now()
            await cut(lambda: custody.sweep(actor="a", reason="r", before=before), slow)
        assert ledger.held(fact.fact_id) is False or ledger.get(fact.fact_id) is None
        assert held(fast) == held(slow) == []  # the cut removal still happened


async def test_a_flow_cut_off_from_its_caller_is_bounded(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A flow that never ends (a store that never answers) holds a cancelled caller only for
    ``FINISH_SECONDS``, then is cut, with an ERROR for the operator."""
    monkeypatch.setattr(finish, "FINISH_SECONDS", 0.2)
    never = Stalls("never", "put")
    with Ledger("memory:") as ledger:
        custody = Custody(ledger, [never])
        task = asyncio.ensure_future(custody.write(request("v")))
        with anyio.fail_after(5):
            await never.reached.wait()
        started = asyncio.get_running_loop().time()
        task.cancel()
        with caplog.at_level(logging.ERROR), pytest.raises(asyncio.CancelledError):
            await task
        waited = asyncio.get_running_loop().time() - started
    assert 0.15 < waited < 3, waited
    assert "did not end in time" in caplog.text


async def test_a_scopes_listen_bus_leaves_with_its_last_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One bus per space scope was made on demand and kept for good: every scope any token
    ever had stayed in memory. It now leaves with the scope's last stream; one still open keeps
    its bus and hears its changes."""
    scope: dict[str, Any] = {"now": None}
    monkeypatch.setattr(app_module, "spaces_of_request", lambda _request, default: scope["now"])
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        async with server_on(ledger) as server, Client(server) as client:
            for n in range(12):
                scope["now"] = scope_arg([f"team:{n}"], "spaces")
                async with client.listen(resource_subscriptions=[resources.HEAD_URI]):
                    assert scope["now"] in server.notifier.scoped
                await until(lambda: list(server.notifier.scoped) == [None])
            scope["now"] = scope_arg(["team:a"], "spaces")
            subject = resources.subject_uri(BASE["subject"])
            async with client.listen(resource_subscriptions=[subject]) as sub:
                events = aiter(sub)
                await call(client, "memory.write", {**BASE, "value": 1, "space": "team:a"})
                with anyio.fail_after(5):
                    assert (await anext(events)).uri == subject  # type: ignore[union-attr]
                assert len(server.notifier.scoped) == 2
            await until(lambda: list(server.notifier.scoped) == [None])


async def test_a_connections_log_level_leaves_with_it(tmp_path: Path) -> None:
    """``logging/setLevel`` kept each connection's level for the server's life (keyed by
    ``id``: a later connection given the same id would hear at a level it never chose)."""
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        async with server_on(ledger) as server:
            for _ in range(5):
                async with Client(server, mode="legacy") as client:
                    with pytest.warns(Warning):  # logging/setLevel is deprecated on 2026-07-28
                        await client.set_logging_level("debug")
                    assert len(server.session_log.levels) == 1
            await until(lambda: server.session_log.levels == {})


class Stuck:
    """A legacy subscriber's session whose sends never complete (its client stopped reading
    and the transport's buffers are full)."""

    def __init__(self) -> None:
        self.tried = anyio.Event()

    async def send_resource_updated(self, uri: str) -> None:
        self.tried.set()
        await anyio.sleep_forever()


async def test_a_subscriber_that_stops_reading_does_not_hold_up_a_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(notify, "SEND_SECONDS", 0.2, raising=False)
    heard: list[str] = []

    async def on_message(message: Any) -> None:
        if getattr(message, "method", None) == "notifications/resources/updated":
            heard.append(str(message.params.uri))

    subject = resources.subject_uri(BASE["subject"])
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        async with (
            server_on(ledger) as server,
            Client(server, mode="legacy", message_handler=on_message) as reader,
            Client(server) as writer,
        ):
            await call(writer, "memory.write", {**BASE, "value": 0, "space": "org"})
            await subscribe(reader, subject)
            stuck = Stuck()
            server.notifier.legacy[-1] = (stuck, {subject})
            with anyio.fail_after(5):
                await call(writer, "memory.write", {**BASE, "value": 1, "space": "org"})
            assert stuck.tried.is_set()
            assert -1 not in server.notifier.legacy  # dropped, as a gone one is
            await until(lambda: bool(heard))  # the subscriber that reads heard all the same
            assert heard == [subject]


async def test_sessions_the_sdk_ended_leave_the_books() -> None:
    """A book per token owner was kept for good, and a session the SDK ended on its own (idle
    timeout) stayed in it until its owner came back: with OAuth, one book per principal ever
    seen. Books holding nothing leave at once; ended sessions are swept as the books grow."""
    live: set[str] = set()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        session = uuid.uuid4().hex
        live.add(session)
        headers = [(b"mcp-session-id", session.encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    limiter = SessionLimiter(app, 4, alive=live.__contains__)

    async def discard(message: Any) -> None:
        return None

    async def receive() -> Any:
        return {"type": "http.request", "body": b"", "more_body": False}

    owners = [object() for _ in range(200)]
    for owner in owners:
        scope = {"type": "http", "method": "POST", "headers": [], "user": owner}
        await limiter(scope, receive, discard)
        live.clear()  # the SDK ends it (idle timeout); its owner never comes back
    assert limiter.held(owners[-1]) == 1
    assert len(limiter._books) < 100  # swept as they doubled, not one per owner ever seen


def test_oauth_principals_leave_with_their_sessions(tmp_path: Path) -> None:
    """Every OAuth principal that ever called kept a user object in the guard and a book in
    the session limiter, for the server's life. A principal with an open session keeps both
    (its session limit holds across requests); one whose sessions ended leaves."""
    issuer = LocalIssuer(tmp_path)
    oauth = OAuthSettings(issuer=DEFAULT_ISSUER, resource=AUDIENCE, jwks_file=str(issuer.jwks))
    with Ledger(tmp_path / "l.jsonl") as ledger:
        server = serve_memory_http(ledger, port=0, require_gateway=False, oauth=oauth)
        try:
            limiter = server.guard.app
            for n in range(20):
                token = issuer.token(AUDIENCE, scope="memory:write", sub=f"user{n}")
                session = post(server.url, token).headers["mcp-session-id"]
                ended = httpx.delete(
                    server.url,
                    headers={
                        **HEADERS,
                        "Authorization": f"Bearer {token}",
                        "Mcp-Session-Id": session,
                    },
                    timeout=10,
                )
                assert ended.status_code < 300
            staying = issuer.token(AUDIENCE, scope="memory:write", sub="stays")
            assert post(server.url, staying).status_code == 200
            assert post(server.url, staying).status_code == 200
            assert len(server.guard._users) == 1  # the static ones (here the anonymous caller)
            assert len(limiter._books) == 1
            (book,) = limiter._books.values()
            # The answer reaches the client before the limiter books the session it opened.
            deadline = time.monotonic() + 10
            while book.opening and time.monotonic() < deadline:
                time.sleep(0.01)
            assert len(book.open) == 2  # one book for both of its sessions
        finally:
            server.close()


def test_a_stop_past_its_drain_lets_a_2026_write_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 2026-07-28 call still running when a stop's drain is over is cancelled by uvicorn
    (natively, 3 s later); the write was cut between its two stores' puts: a fact in the first
    store that no ledger records. It now finishes, and the server's loop waits for it."""
    monkeypatch.setattr(drain, "DRAIN_SECONDS", 0.2)
    ledger = Ledger(tmp_path / "l.jsonl")
    fast, slow = InProcessStore("fast"), SlowStore(3.8)
    server = serve_memory_http(ledger, port=0, stores=[fast, slow], require_gateway=False)
    outcome: list[Any] = []

    async def write() -> None:
        async with Client(server.url) as client:
            assert client.protocol_version == "2026-07-28"
            arguments = {"subject": "s", "predicate": "p", "value": "v", "space": "org"}
            outcome.append(await client.call_tool("memory.write", arguments, meta=META))  # type: ignore[arg-type]

    def run() -> None:
        try:
            anyio.run(write)
        except BaseException as exc:  # the stop ends the client's connection
            outcome.append(exc)

    caller = threading.Thread(target=run)
    try:
        caller.start()
        assert slow.putting.wait(20)
        server.close()
        caller.join(30)
    finally:
        server.close()
        ledger.close()
    with Ledger(tmp_path / "l.jsonl") as reopened:
        recorded = [f.fact_id for f in reopened.facts()]
    assert held(fast) == held(slow) == recorded and len(recorded) == 1, outcome

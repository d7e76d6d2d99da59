"""The issuer's keys from a JWKS URL (issue 13 section 3, ``server/jwks.py``).

A loopback HTTP server (``JwksServer``) publishes the local issuer's keys; the in-process memory
server fetches them. Key rotation costs one refetch; unknown key ids refetch at most once every
``min_refresh`` seconds; an unreachable, failing or silent JWKS URL answers 401 at once or
within the fetch timeout, with one clear log line, never a 500 and never a hang.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from servertest import post

from agent_custody_state import Ledger, serve_memory_http
from agent_custody_state.server.http import MemoryHttpServer
from agent_custody_state.server.oauth import OAuthSettings
from agent_custody_state_conformance.issuer import JwksServer, LocalIssuer

AUD = "http://127.0.0.1/mcp"
MIN_REFRESH = 1.0
TIMEOUT = 0.5
JWKS_LOG = "agent_custody_state.server.jwks"


@contextmanager
def memory_server(tmp_path: Path, jwks_url: str, **settings: Any) -> Iterator[MemoryHttpServer]:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    options: dict[str, Any] = {"min_refresh": MIN_REFRESH, "jwks_timeout": TIMEOUT, **settings}
    oauth = OAuthSettings(issuer="https://issuer.test", resource=AUD, jwks_url=jwks_url, **options)
    server = serve_memory_http(ledger, port=0, require_gateway=False, oauth=oauth)
    try:
        yield server
    finally:
        server.close()
        ledger.close()


def fetches(server: MemoryHttpServer) -> int:
    """Fetches the memory server attempted (the JWKS server counts the ones that arrived)."""
    assert server.guard.oauth is not None
    return server.guard.oauth.jwks.fetches


def status(server: MemoryHttpServer, token: str) -> int:
    return post(server.url, token).status_code


@pytest.fixture
def issuer(tmp_path: Path) -> LocalIssuer:
    return LocalIssuer(tmp_path)


def test_keys_come_from_the_url_once_and_are_cached(tmp_path: Path, issuer: LocalIssuer) -> None:
    with JwksServer(issuer) as jwks, memory_server(tmp_path, jwks.jwks_url) as server:
        for _ in range(3):
            assert status(server, issuer.token(AUD, scope="memory:read")) == 200
        assert jwks.fetches == 1


def test_a_rotated_key_costs_one_refetch_and_unknown_kids_are_rate_limited(
    tmp_path: Path, issuer: LocalIssuer
) -> None:
    stranger = LocalIssuer(tmp_path, name="stranger")  # keys the issuer never published
    interval = 3.0  # long enough for the flood below on a busy machine
    with (
        JwksServer(issuer) as jwks,
        memory_server(tmp_path, jwks.jwks_url, min_refresh=interval) as server,
    ):
        assert status(server, issuer.token(AUD, scope="memory:read")) == 200
        issuer.rotate()
        # Eight requests at once with the new key: one refetch between them.
        with ThreadPoolExecutor(8) as pool:
            codes = list(
                pool.map(lambda _: status(server, issuer.token(AUD, scope="memory:read")), range(8))
            )
        assert codes == [200] * 8
        assert jwks.fetches == 2
        # A flood of made-up key ids right after: refused, and no fetch at all.
        started = time.monotonic()
        for _ in range(10):
            assert status(server, stranger.token(AUD, scope="memory:read")) == 401
        assert jwks.fetches == 2, time.monotonic() - started
        time.sleep(interval + 0.1)
        assert status(server, stranger.token(AUD, scope="memory:read")) == 401
        assert jwks.fetches == 3  # one more once the interval has passed


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def silent_server() -> Iterator[str]:
    """A socket that listens and never answers: connections complete, requests wait forever."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/.well-known/jwks.json"


@pytest.mark.parametrize("where", ["connection refused", "no answer"])
def test_an_unreachable_jwks_url_is_a_quick_401_with_one_log_line(
    tmp_path: Path, issuer: LocalIssuer, where: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=JWKS_LOG)
    with silent_server() as silent:
        url = (
            f"http://127.0.0.1:{closed_port()}/jwks.json"
            if where == "connection refused"
            else silent
        )
        with memory_server(tmp_path, url) as server:
            token = issuer.token(AUD, scope="memory:read")
            started = time.monotonic()
            response = post(server.url, token)
            took = time.monotonic() - started
            assert response.status_code == 401
            challenge = response.headers["www-authenticate"]
            assert 'error="invalid_token"' in challenge
            assert "signing keys cannot be loaded" in challenge
            assert took < TIMEOUT + 1.5, took
            # Within the interval, further tokens are refused at once, without a new attempt.
            started = time.monotonic()
            for _ in range(5):
                assert status(server, token) == 401
            assert time.monotonic() - started < 1.0
            assert fetches(server) == 1
    lines = [r for r in caplog.records if r.name == JWKS_LOG]
    assert len(lines) == 1 and lines[0].levelno == logging.ERROR
    message = lines[0].getMessage()
    assert url in message and "every access token is refused (401)" in message
    if where == "no answer":
        assert f"no answer within {TIMEOUT:g} s" in message


def test_a_failing_jwks_recovers_and_cached_keys_outlive_an_outage(
    tmp_path: Path, issuer: LocalIssuer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=JWKS_LOG)
    with JwksServer(issuer) as jwks:
        jwks.fail = True
        with memory_server(tmp_path, jwks.jwks_url, cache_seconds=MIN_REFRESH) as server:
            token = issuer.token(AUD, scope="memory:read")
            assert status(server, token) == 401
            assert "HTTP 500" in caplog.records[-1].getMessage()
            jwks.fail = False
            time.sleep(MIN_REFRESH + 0.1)
            assert status(server, token) == 200  # recovered without a restart
            jwks.fail = True
            time.sleep(MIN_REFRESH + 0.1)  # the keys are stale now, and the issuer is down
            assert status(server, token) == 200
            assert "keeping the cached keys" in caplog.records[-1].getMessage()
            assert caplog.records[-1].levelno == logging.WARNING

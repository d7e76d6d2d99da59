"""The issuer's signing keys (a JWKS), from a file or a URL, cached and refetched with care.

``JwksCache.key_data(kid)`` answers the JWK a token names. The keys are loaded on first use and
again when older than ``cache_seconds``. A token naming a key not seen yet (the issuer rotated
its keys) triggers one refetch at once, but unknown key ids refetch at most once every
``min_refresh`` seconds, so a flood of made-up ids cannot turn the server into a JWKS-fetching
loop. Concurrent requests share one fetch.

A fetch that fails (unreachable URL, an error status, not a JWKS) keeps the keys already held,
if any; with none, tokens are refused at once (``JwksError``, a 401) and the failure is logged
as one clear line, and the next attempt waits ``min_refresh`` seconds: an unreachable issuer
costs each request nothing, and no request waits longer than ``timeout`` for a fetch.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

log = logging.getLogger(__name__)

#: Largest JWKS document accepted (an issuer publishes a handful of keys, a few KiB).
MAX_JWKS_BYTES = 1024 * 1024


class JwksError(Exception):
    """No key for this token: the key is not among the issuer's, or the keys cannot be loaded."""


class JwksCache:
    """The issuer's keys by ``kid`` (see the module docstring)."""

    def __init__(
        self,
        *,
        file: str | None = None,
        url: str | None = None,
        cache_seconds: float = 300.0,
        min_refresh: float = 10.0,
        timeout: float = 5.0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        if (file is None) == (url is None):
            raise ValueError("give exactly one of a JWKS file and a JWKS URL")
        self.file, self.url = file, url
        self.cache_seconds, self.min_refresh, self.timeout = cache_seconds, min_refresh, timeout
        self._client = client
        self._keys: dict[str | None, dict[str, Any]] = {}
        self._loaded = float("-inf")  # last successful load
        self._failed = float("-inf")  # last failed attempt
        self._kid_refetch = float("-inf")  # last refetch caused by an unknown key id
        self._error = ""
        self._lock = anyio.Lock()
        self.fetches = 0  # attempts made, for tests and the bench

    @property
    def source(self) -> str:
        return self.url or self.file or ""

    def _find(self, kid: str | None) -> dict[str, Any] | None:
        data = self._keys.get(kid)
        if data is None and kid is None and len(self._keys) == 1:
            data = next(iter(self._keys.values()))  # a token naming no key, one key published
        return data

    def _due(self, kid: str | None, now: float) -> str | None:
        """Why the keys should be fetched now (``"stale"``, ``"kid"``), or None."""
        if now - self._failed < self.min_refresh:
            return None  # the last attempt failed: wait before the next
        if now - self._loaded > self.cache_seconds:
            return "stale"
        if self._find(kid) is None and now - self._kid_refetch >= self.min_refresh:
            return "kid"
        return None

    async def key_data(self, kid: str | None) -> dict[str, Any]:
        if self._find(kid) is None or self._due(kid, time.monotonic()) is not None:
            # Also when no fetch is due: one may be under way (a rotation seen by a
            # concurrent request), and its keys are the ones to check against.
            async with self._lock:
                reason = self._due(kid, time.monotonic())
                if reason is not None:
                    await self._refresh(reason)
        data = self._find(kid)
        if data is not None:
            return data
        if not self._keys:
            raise JwksError(f"the issuer's signing keys cannot be loaded ({self._error})")
        raise JwksError("the token's signing key is not among the issuer's keys")

    async def _refresh(self, reason: str) -> None:
        self.fetches += 1
        if reason == "kid":
            self._kid_refetch = time.monotonic()
        try:
            with anyio.fail_after(self.timeout):
                document = await self._load()
            keys = document.get("keys") if isinstance(document, dict) else None
            if not isinstance(keys, list):
                raise ValueError("not a JWKS document (no 'keys' list)")
        except Exception as exc:
            self._failed = time.monotonic()
            self._error = _describe(exc, self.timeout)
            if self._keys:
                log.warning(
                    "OAuth: JWKS refresh from %s failed, keeping the cached keys: %s",
                    self.source,
                    self._error,
                )
            else:
                log.error(
                    "OAuth: cannot load the issuer's JWKS from %s: %s; every access token is "
                    "refused (401) until it loads; next attempt in %g s at the earliest",
                    self.source,
                    self._error,
                    self.min_refresh,
                )
            return
        self._keys = {k.get("kid"): k for k in keys if isinstance(k, dict)}
        self._loaded = time.monotonic()

    async def _load(self) -> Any:
        if self.file is not None:
            text = await anyio.to_thread.run_sync(Path(self.file).read_text)
            return json.loads(text)
        assert self.url is not None
        client = self._client or httpx.AsyncClient(timeout=self.timeout)
        try:
            async with client.stream("GET", self.url) as response:
                response.raise_for_status()
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_JWKS_BYTES:
                        raise ValueError(f"the JWKS is larger than {MAX_JWKS_BYTES} bytes")
            return json.loads(body)
        finally:
            if self._client is None:
                await client.aclose()


def _describe(exc: Exception, timeout: float) -> str:
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return f"no answer within {timeout:g} s"
    if isinstance(exc, httpx.HTTPStatusError):
        return f"HTTP {exc.response.status_code}"
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect ({exc})"
    if isinstance(exc, json.JSONDecodeError):
        return "the answer is not JSON"
    return f"{type(exc).__name__}: {exc}"

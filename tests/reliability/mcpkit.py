"""The reliability tests' memory servers and raw MCP client: ``ServerProcess`` runs
``agent-custody-memory serve`` as a subprocess (HTTP or stdio), ``RawMcp`` speaks JSON-RPC over
Streamable HTTP with nothing hidden, ``gateway_meta`` is the ``_meta`` a receipts gateway sends.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from typing import Any

# -- memory servers and a raw MCP client ------------------------------------------------------

CLI = [sys.executable, "-m", "agent_custody_state"]


class ServerProcess:
    """``agent-custody-memory serve`` as a subprocess, every byte of its stderr kept.

    HTTP: ``url`` is parsed from the startup line. stdio: talk through ``stdin``/``stdout``.
    ``command`` replaces ``python -m agent_custody_state`` (e.g. to lower a resource limit).
    """

    def __init__(
        self,
        args: list[str],
        env: dict[str, str] | None = None,
        *,
        http: bool = True,
        timeout: float = 60,
        command: list[str] | None = None,
    ) -> None:
        import re
        import threading

        self.args = args
        self.stderr_lines: list[str] = []
        cmd = [*(command or CLI), "serve", *(["--http", "--port", "0"] if http else []), *args]
        self.proc = subprocess.Popen(
            cmd,
            env={**os.environ, **(env or {})},
            stderr=subprocess.PIPE,
            stdin=None if http else subprocess.PIPE,
            stdout=None if http else subprocess.PIPE,
        )
        assert self.proc.stderr is not None
        self.url = ""
        deadline = time.monotonic() + timeout
        while http and time.monotonic() < deadline:
            raw = self.proc.stderr.readline()
            if not raw:
                break
            line = raw.decode("utf-8", "replace")
            self.stderr_lines.append(line)
            match = re.search(r"serving (http://\S+/mcp)", line)
            if match:
                self.url = match.group(1)
                break
        if http and not self.url:
            self.proc.kill()
            rest = self.proc.stderr.read().decode("utf-8", "replace")
            raise RuntimeError("server did not start:\n" + "".join(self.stderr_lines) + rest)
        stream = self.proc.stderr

        def drain() -> None:
            for raw in stream:
                self.stderr_lines.append(raw.decode("utf-8", "replace"))

        self._drain = threading.Thread(target=drain, daemon=True)
        self._drain.start()

    @property
    def stderr(self) -> str:
        return "".join(self.stderr_lines)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def exchange(self, data: bytes, timeout: float) -> bytes:
        """stdio: write ``data``, close stdin, and return everything on stdout until it closes.

        Not ``Popen.communicate``: that reads stderr too, which the drain thread already reads,
        and a blocking read of a pipe the drain thread emptied first never returns.
        """
        assert self.proc.stdin is not None and self.proc.stdout is not None
        stdin, stdout = self.proc.stdin, self.proc.stdout

        def feed() -> None:
            with contextlib.suppress(OSError):  # the server may stop reading first
                stdin.write(data)
            with contextlib.suppress(OSError):
                stdin.close()

        out: list[bytes] = []
        reader = threading.Thread(target=lambda: out.append(stdout.read()), daemon=True)
        writer = threading.Thread(target=feed, daemon=True)
        reader.start()
        writer.start()
        reader.join(timeout)
        if reader.is_alive():
            self.proc.kill()
            raise TimeoutError(f"no end of stdout within {timeout} s:\n{self.stderr}")
        writer.join(timeout)
        return out[0]

    def stop(self) -> int:
        if self.proc.stdin is not None:
            # stdio: end of input is the clean way to stop; give it the chance to exit 0.
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._drain.join(5)
        return self.proc.returncode


PROTOCOL = "2025-06-18"


class RawMcp:
    """A minimal Streamable HTTP MCP client on httpx: JSON-RPC POSTs, nothing hidden.

    The official client would do; this one is lighter (32 of them share two CPUs with two
    servers) and lets a test send exactly the bytes and headers it wants.
    """

    def __init__(
        self, client: Any, url: str, token: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        self.client, self.url = client, url
        self.headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            **(headers or {}),
        }
        if token is not None:
            self.headers["authorization"] = f"Bearer {token}"
        self.next_id = 1

    async def post(
        self, body: bytes | dict[str, Any], headers: dict[str, str] | None = None
    ) -> Any:
        data = body if isinstance(body, bytes) else encode_json(body)
        return await self.client.post(
            self.url, content=data, headers={**self.headers, **(headers or {})}
        )

    async def rpc(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}}
        response = await self.post(body)
        if response.status_code != 200:
            return {"httpStatus": response.status_code, "body": response.text}
        reply: dict[str, Any] = response.json()
        return reply

    async def open(self) -> RawMcp:
        response = await self.post(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": PROTOCOL,
                    "capabilities": {},
                    "clientInfo": {"name": "reliability", "version": "0"},
                },
            }
        )
        if response.status_code != 200:
            raise RuntimeError(f"initialize: HTTP {response.status_code} {response.text[:200]}")
        session = response.headers.get("mcp-session-id")
        if session:
            self.headers["mcp-session-id"] = session
        self.headers["mcp-protocol-version"] = PROTOCOL
        await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self

    async def call(
        self, name: str, arguments: Any, meta: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """``tools/call``; returns ``{"isError", "texts", "meta"}`` or ``{"httpStatus", ...}``
        or ``{"rpcError": ...}``."""
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if meta is not None:
            params["_meta"] = meta
        reply = await self.rpc("tools/call", params)
        if "httpStatus" in reply:
            return reply
        if "error" in reply:
            return {"rpcError": reply["error"]}
        result = reply["result"]
        return {
            "isError": bool(result.get("isError")),
            "texts": [c.get("text", "") for c in result.get("content", [])],
            "meta": result.get("_meta") or {},
        }


def gateway_meta(agent: str = "reliability-agent", **extra: Any) -> dict[str, Any]:
    import uuid

    return {"agent-custody/receipt": f"rcpt-{uuid.uuid4()}", "agent-custody/agent": agent, **extra}


class _Raw(str):
    """A piece of JSON text already encoded (used by ``encode_json``'s stack)."""


def encode_json(value: Any) -> bytes:
    """JSON text for any value, at any nesting depth (the stdlib encoder recurses and stops near
    a thousand levels; hostile inputs nest far deeper). NaN and infinities are written as
    Python writes them (``NaN``), which is not JSON: a server must refuse them cleanly."""
    parts: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Raw):
            parts.append(item)
        elif isinstance(item, dict):
            parts.append("{")
            stack.append(_Raw("}"))
            entries = list(item.items())
            for i in reversed(range(len(entries))):
                key, child = entries[i]
                stack.append(child)
                stack.append(_Raw(json.dumps(str(key)) + ":"))
                if i:
                    stack.append(_Raw(","))
        elif isinstance(item, list | tuple):
            parts.append("[")
            stack.append(_Raw("]"))
            for i in reversed(range(len(item))):
                stack.append(item[i])
                if i:
                    stack.append(_Raw(","))
        else:
            parts.append(json.dumps(item))
    return "".join(parts).encode("utf-8")


#: Client-side keep-alive shorter than the server's (uvicorn closes idle connections after 5 s):
#: a client that reuses a connection at the moment the server closes it gets a ReadError that
#: says nothing about the server. Every HTTP client here uses these limits.
HTTP_LIMITS_KW: dict[str, Any] = {"max_connections": 100, "keepalive_expiry": 2.0}


def http_client(timeout: float = 60) -> Any:
    """An ``httpx.AsyncClient`` that never reuses a connection the server may be closing."""
    import httpx

    return httpx.AsyncClient(timeout=timeout, limits=httpx.Limits(**HTTP_LIMITS_KW))

"""Shared machinery of the reliability tests: the stress switch, figures, the fault shim, scans.

``STRESS`` (environment ``AGENT_CUSTODY_STRESS=1``) selects the long versions; ``scale(short,
long)`` picks the figure. ``record(name, **figures)`` prints a test's figures and appends them as
one JSON line to ``tests/reliability/.results.jsonl`` (git-ignored), which is where the table in
``docs/reliability.md`` comes from. ``build_faultshim`` compiles the LD_PRELOAD fault injector.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
REPO = HERE.parent.parent
STRESS = os.environ.get("AGENT_CUSTODY_STRESS", "") == "1"
RESULTS = Path(os.environ.get("AGENT_CUSTODY_RESULTS", HERE / ".results.jsonl"))

#: Figures recorded in this pytest process, printed again in the terminal summary.
COLLECTED: list[dict[str, Any]] = []


def scale(short: int, long: int) -> int:
    """The short figure in a normal run, the long one under ``AGENT_CUSTODY_STRESS=1``."""
    return long if STRESS else short


def record(name: str, **figures: Any) -> dict[str, Any]:
    """Print a test's figures and append them to the results file; returns the record."""
    line = {
        "test": name,
        "stress": STRESS,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        **figures,
    }
    COLLECTED.append(line)
    print("FIGURES " + json.dumps(line, sort_keys=False))
    with open(RESULTS, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")
    return line


# -- the LD_PRELOAD fault shim ---------------------------------------------------------------


def build_faultshim(out_dir: Path) -> tuple[Path | None, str]:
    """Compile ``faultshim.c``; returns (path, "") or (None, why it could not be built)."""
    if not sys.platform.startswith("linux"):
        return None, "the fault shim interposes glibc calls with LD_PRELOAD (Linux only)"
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if compiler is None:
        return None, "no C compiler (cc/gcc) to build the LD_PRELOAD fault shim"
    out = out_dir / "faultshim.so"
    proc = subprocess.run(
        [compiler, "-shared", "-fPIC", "-O1", "-o", str(out), str(HERE / "faultshim.c"), "-ldl"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        return None, f"the fault shim did not compile: {proc.stderr.strip()[:500]}"
    return out, ""


# -- scanning files for bytes -----------------------------------------------------------------


def files_under(root: Path) -> list[Path]:
    """Every regular file under ``root`` (sockets and vanished files skipped)."""
    found = []
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            try:
                if path.is_file() and not path.is_symlink():
                    found.append(path)
            except OSError:
                continue
    return sorted(found)


def scan(files: Iterable[Path], needles: Iterable[bytes]) -> dict[bytes, list[str]]:
    """Which of ``needles`` occur in which of ``files`` (only hits are returned)."""
    wanted = [n for n in dict.fromkeys(needles) if n]
    hits: dict[bytes, list[str]] = {}
    if not wanted:
        return hits
    for path in files:
        try:
            data = path.read_bytes()
        except (FileNotFoundError, IsADirectoryError, PermissionError):
            continue
        for needle in wanted:
            if needle in data:
                hits.setdefault(needle, []).append(str(path))
    return hits


def digest_files(files: Iterable[Path]) -> str:
    """One sha256 over the names and bytes of ``files`` (missing files count as absent)."""
    h = hashlib.sha256()
    for path in files:
        h.update(str(path).encode() + b"\0")
        try:
            h.update(path.read_bytes())
        except FileNotFoundError:
            h.update(b"<absent>")
        h.update(b"\0")
    return h.hexdigest()


# -- processes ---------------------------------------------------------------------------------


def python() -> str:
    return sys.executable


def cli() -> list[str]:
    """The command line tool, run with this interpreter (no reliance on PATH)."""
    return [
        sys.executable,
        "-c",
        "import sys; from agent_custody_state.cli import main; sys.exit(main())",
    ]


def wait_for(predicate: Any, timeout: float, what: str, interval: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


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


def run_planned(
    zygote: Any,
    plan: dict[str, Any],
    params: dict[str, Any],
    known: Any,
    ack: Path,
    tmp_path: Path,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run one worker under ``plan`` (a timer kill is sent from here); its exit status and the
    acknowledgement lines it wrote."""
    pid = zygote.run(**params)
    if plan["mode"] == "timer":
        time.sleep(plan["delay"])
        os.kill(pid, signal.SIGKILL)
    status = zygote.wait(pid, timeout=120)
    assert not status["hung"], f"worker hung ({plan}); see {tmp_path}/zygote.log"
    return status, known.read(ack)

"""The stdio transport, with a message size limit the SDK's own stdio transport lacks.

Newline-delimited JSON-RPC on stdin/stdout. A message longer than ``max_message_bytes`` is never
held in memory: the reader keeps only its first and last 64 KiB (to find the request id), drops
the rest up to the newline, answers that request with a JSON-RPC error and goes on serving.
A line that is not JSON-RPC gets a parse error instead of silence. At the end of input the
requests already read are answered (for up to 10 s) before the server stops.

Reading and writing wait on the event loop (a pipe, socket or terminal is polled, then read or
written without blocking), so a call costs no thread hop; only a regular file as stdin or stdout
is read or written from a thread.

While serving, fd 0 reads from /dev/null and fd 1 points at stderr, so a stray ``print`` in a
plugin cannot corrupt the protocol stream; both are restored on exit.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import stat
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.lowlevel import Server
from mcp.shared.message import SessionMessage

from agent_custody_state.server import rpcid
from agent_custody_state.server.foreign import watched
from agent_custody_state.server.rpcid import BAD_ID, bad_request_id, is_request_id

DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024
_KEEP = 64 * 1024  # bytes kept from each end of an oversized message, to find its id
_READ_CHUNK = 1 << 16
_DRAIN_SECONDS = 10  # at end of input, how long answers to requests already read are awaited

_ID = r'(-?\d+|"(?:[^"\\]|\\.)*")'
# The id is found only where it is certainly a top-level member: first (after an optional
# "jsonrpc") or last before the closing brace. Anything else is answered with id null.
_HEAD_ID = re.compile(rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _ID.encode())
_TAIL_ID = re.compile(rb'"id"\s*:\s*' + _ID.encode() + rb"\s*\}\s*$")


@dataclass
class Oversized:
    """A message dropped for its size: how big it was, and its two ends."""

    size: int
    head: bytes
    tail: bytes

    def request_id(self) -> Any:
        match = _HEAD_ID.match(self.head) or _TAIL_ID.search(self.tail)
        return json.loads(match.group(1)) if match else None


class LineFramer:
    """Split a byte stream into lines, replacing any line over ``limit`` bytes by ``Oversized``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._buf = bytearray()
        self._dropping: Oversized | None = None

    def feed(self, chunk: bytes) -> list[bytes | Oversized]:
        out: list[bytes | Oversized] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if self._dropping is not None:
                self._dropping.size += len(piece)
                self._dropping.tail = (self._dropping.tail + piece)[-_KEEP:]
            else:
                self._buf += piece
                if len(self._buf) > self.limit:
                    data = bytes(self._buf)
                    self._dropping = Oversized(len(data), data[:_KEEP], data[-_KEEP:])
                    self._buf.clear()
            if end < 0:
                return out
            if self._dropping is not None:
                out.append(self._dropping)
                self._dropping = None
            else:
                line = bytes(self._buf).rstrip(b"\r")
                self._buf.clear()
                if line.strip():
                    out.append(line)
            start = end + 1


def _error(request_id: Any, code: int, message: str) -> SessionMessage:
    return SessionMessage(
        types.JSONRPCError(
            jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message)
        )
    )


def _parse(line: bytes) -> SessionMessage:
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except Exception as exc:
        return _refusal(line, exc)
    if isinstance(message, types.JSONRPCNotification) and bad_request_id(line):
        return _error(None, types.INVALID_REQUEST, BAD_ID)
    return SessionMessage(message)


#: What the SDK parser's refusal says -> what the caller is told.
_REASONS = (
    ("recursion limit exceeded", "nested too deeply (a memory value may nest 128 levels)"),
    ("number out of range", "a number has more than 4300 digits; send it as a string"),
)


def _lenient_int(digits: str) -> int | None:
    # Python will not read an integer of more than 4,300 digits; the request is refused anyway,
    # so such a number reads as None and the rest of the message (its id) is still found.
    return int(digits) if len(digits.lstrip("-")) <= 4300 else None


def _surrogate_path(data: Any) -> str | None:
    """Where the first string (or key) with a lone surrogate is, as ``params.arguments.s``."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return path or "(message)"
        elif isinstance(item, dict):
            for key, member in reversed(item.items()):
                where = f"{path}.{key}" if path else str(key)
                if _surrogate_path(key) is not None:
                    return where
                stack.append((member, where))
        elif isinstance(item, list):
            stack.extend(reversed([(m, f"{path}[{i}]") for i, m in enumerate(item)]))
    return None


def _refusal(line: bytes, exc: Exception) -> SessionMessage:
    """The answer to a line the SDK's parser refused, with the request's id whenever it can be
    found and the reason when it is one a caller can fix."""
    detail = str(exc)
    try:
        data = json.loads(line, parse_int=_lenient_int)
    except ValueError:
        return _error(None, types.PARSE_ERROR, f"parse error: {exc.__class__.__name__}")
    except RecursionError:
        # Valid JSON nested thousands deep: answering it must not end the server (the
        # reader task would die with it), and the caller waits for its id, found the way
        # an oversized message's is.
        request_id = Oversized(len(line), line[:_KEEP], line[-_KEEP:]).request_id()
        return _error(
            request_id, types.PARSE_ERROR, "parse error: the message is nested too deeply"
        )
    request_id = data.get("id") if isinstance(data, dict) else None
    if not is_request_id(request_id):
        request_id = None
    reason = next((text for needle, text in _REASONS if needle in detail), None)
    if reason is None and (where := _surrogate_path(data)) is not None:
        reason = f"{where}: lone surrogate, pass valid Unicode"
    message = "invalid JSON-RPC message" + (f": {reason}" if reason else "")
    return _error(request_id, types.INVALID_REQUEST, message)


def pollable(fd: int) -> bool:
    """Whether the event loop can wait on ``fd`` (a pipe, socket or terminal; not a regular
    file, which epoll refuses and which never blocks anyway)."""
    return not stat.S_ISREG(os.fstat(fd).st_mode)


async def _read_chunks(fd: int) -> AsyncIterator[bytes]:
    """Chunks read from ``fd`` until end of input.

    A pipe, socket or terminal is waited on by the event loop and read once readable, so a
    message costs no thread hop and cancelling (a stop signal) needs nothing from the reader.
    Anything the loop cannot wait on is read by a daemon thread (``_read_in_daemon_thread``).
    """
    if not pollable(fd):
        async with _read_in_daemon_thread(fd) as chunks:
            async for chunk in chunks:
                yield chunk
        return
    while True:
        await anyio.wait_readable(fd)
        chunk = os.read(fd, _READ_CHUNK)  # readable: returns what is there, without blocking
        if not chunk:
            return
        yield chunk


def _read_in_daemon_thread(fd: int) -> MemoryObjectReceiveStream[bytes]:
    """Chunks read from ``fd`` by a daemon thread; the stream ends at end of input.

    A daemon thread, not a worker of anyio's pool: a read blocked on a pipe cannot be interrupted,
    and when the server stops on a signal the process must be able to exit without waiting for
    input that may never come (a pool worker would be joined at interpreter exit).
    """
    send, receive = anyio.create_memory_object_stream[bytes](1)
    token = anyio.lowlevel.current_token()

    def pump() -> None:
        try:
            while chunk := os.read(fd, _READ_CHUNK):
                anyio.from_thread.run(send.send, chunk, token=token)
        except Exception:  # the loop is gone (server stopped) or the descriptor failed
            pass
        finally:
            with contextlib.suppress(Exception):
                anyio.from_thread.run_sync(send.close, token=token)

    threading.Thread(target=pump, name="stdin-reader", daemon=True).start()
    return receive


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


async def _write(fd: int, data: bytes, polled: bool) -> None:
    """Write ``data`` to ``fd`` without blocking the event loop.

    On a pipe, socket or terminal, ``PIPE_BUF`` bytes at a time once the descriptor is writable
    (a pipe that reports writable takes that much without blocking); the usual answer goes out
    in one ``write`` with no thread hop. Anything else is written from a worker thread.
    """
    if not polled:
        await anyio.to_thread.run_sync(_write_all, fd, data)
        return
    view = memoryview(data)
    while view:
        if not select.select([], [fd], [], 0)[1]:
            await anyio.wait_writable(fd)
        view = view[os.write(fd, view[: select.PIPE_BUF]) :]


@asynccontextmanager
async def stdio_transport(
    *,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    in_fd: int | None = None,
    out_fd: int | None = None,
    stop_on_signals: bool = False,
    stop_requested: threading.Event | None = None,
) -> AsyncIterator[tuple[MemoryObjectReceiveStream[Any], MemoryObjectSendStream[Any]]]:
    """Serve JSON-RPC over the process's stdin/stdout (or the given descriptors).

    ``stop_on_signals``: SIGTERM and SIGINT end the input as end of file does (main thread
    only): nothing more is read, calls already read are answered, then the transport closes.
    """
    claimed = in_fd is None and out_fd is None
    restore: list[tuple[int, int]] = []
    if claimed:
        in_fd, out_fd = os.dup(0), os.dup(1)
        restore = [(in_fd, 0), (out_fd, 1)]
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)
    assert in_fd is not None and out_fd is not None
    read_send, read_recv = anyio.create_memory_object_stream[Any](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)
    # The reader answers oversized and unparsable messages itself, through the same writer.
    reply_send = write_send.clone()

    # At end of input the server keeps an open (empty) stream until every request already read
    # is answered, so `echo request | agent-custody-memory serve` gets its answer.
    outstanding, handshake = rpcid.Outstanding(), rpcid.Handshake()

    reading = anyio.CancelScope()

    async def reader() -> None:
        async with read_send, reply_send:
            with reading:
                await read_messages()
            # End of input, or a stop signal: read nothing more, answer what was read.
            await outstanding.drained(_DRAIN_SECONDS)

    async def stop_on_signal() -> None:
        # SIGTERM (containers, service managers) and SIGINT stop the server as end of input
        # does: in-flight calls finish and are answered, then the server exits cleanly.
        # Open until the transport closes: leaving it would give both signals their default
        # action back, and a second signal would kill the server amid the calls being finished.
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            if stop_requested is not None and stop_requested.is_set():
                reading.cancel()  # the signal came before this receiver listened
            async for _ in signals:
                reading.cancel()

    async def read_messages() -> None:
        framer = LineFramer(max_message_bytes)
        async for chunk in _read_chunks(in_fd):
            await handle(framer, chunk)

    async def handle(framer: LineFramer, chunk: bytes) -> None:
        for item in framer.feed(chunk):
            if isinstance(item, Oversized):
                await reply_send.send(
                    _error(
                        item.request_id(),
                        types.INVALID_REQUEST,
                        f"message too large: {item.size} bytes; the limit is "
                        f"{max_message_bytes} bytes (max_request_bytes)",
                    )
                )
                continue
            message = _parse(item)
            if isinstance(message.message, types.JSONRPCError):
                await reply_send.send(message)
            else:
                request = message.message
                if isinstance(request, types.JSONRPCRequest):
                    if handshake.refuses(request.method, request.id):
                        await reply_send.send(
                            _error(request.id, types.INVALID_REQUEST, rpcid.ALREADY_INITIALIZED)
                        )
                        continue
                    message.metadata = outstanding.read(request.id)
                await read_send.send(message)

    written = anyio.Event()
    polled = pollable(out_fd)

    async def writer() -> None:
        gone = False  # the client closed its end: read nothing more, finish what was read
        try:
            async with write_recv:
                async for message in write_recv:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    try:
                        if not gone:
                            await _write(out_fd, data.encode() + b"\n", polled)
                    except (BrokenPipeError, ConnectionResetError):
                        gone = True
                        reading.cancel()
                    if isinstance(message.message, types.JSONRPCResponse | types.JSONRPCError):
                        outstanding.answered(message.message.id)
                        ok = isinstance(message.message, types.JSONRPCResponse)
                        handshake.answered(message.message.id, ok)
        finally:
            written.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            tg.start_soon(writer)
            if stop_on_signals and threading.current_thread() is threading.main_thread():
                tg.start_soon(stop_on_signal)
            yield read_recv, write_send
            # Let the last answers reach stdout before stopping (the reader is usually done:
            # stdin closed is what ended the server).
            await write_send.aclose()
            with anyio.move_on_after(2):
                await written.wait()
            tg.cancel_scope.cancel()
    finally:
        for saved, fd in restore:
            os.dup2(saved, fd)
            os.close(saved)


async def serve_stdio(
    server: Server[Any],
    *,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    stop_on_signals: bool = True,
    stop_requested: threading.Event | None = None,
) -> None:
    """Run ``server`` over stdio until stdin closes, or SIGTERM/SIGINT (then in-flight calls
    are answered first)."""
    async with stdio_transport(
        max_message_bytes=max_message_bytes,
        stop_on_signals=stop_on_signals,
        stop_requested=stop_requested,
    ) as (read, write):
        async with watched(contextlib.nullcontext(), getattr(server, "notifier", None)):
            await server.run(read, write, server.create_initialization_options())

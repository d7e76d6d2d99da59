"""The stdio transport, with a message size limit the SDK's own stdio transport lacks.

Newline-delimited JSON-RPC on stdin/stdout. A message longer than ``max_message_bytes`` is never
held in memory: the reader keeps only its first and last 64 KiB (to find the request id), drops
the rest up to the newline, answers that request with a JSON-RPC error and goes on serving.
A line that is not JSON-RPC gets a parse error instead of silence (``stdio_messages``). At the
end of input, or on SIGTERM, SIGINT or SIGHUP, the requests the server took are answered (for up
to 10 s) before it stops. At most ``MAX_OWED`` requests are held at once: past that, stdin is not
read until an answer is written, so a gateway that stops reading cannot grow the server's memory.

Reading and writing wait on the event loop (a pipe, socket or terminal is polled, then read or
written without blocking), so a call costs no thread hop; only a regular file as stdin or stdout
is read or written from a thread.

While serving, fd 0 reads from /dev/null and fd 1 points at stderr, so a stray ``print`` in a
plugin cannot corrupt the protocol stream; both are restored on exit.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import stat
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import mcp_types as types
from anyio.abc import ObjectReceiveStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.lowlevel import Server
from mcp.shared.message import SessionMessage

from agent_custody_state.maskedtrace import log_traceback
from agent_custody_state.server import rpcid
from agent_custody_state.server.foreign import watched
from agent_custody_state.server.stdio_messages import (
    TRANSPORT,
    LineFramer,
    Oversized,
    answerable_id,
    error_reply,
    parse,
)
from agent_custody_state.stores.masking import masker

__all__ = ["LineFramer", "Oversized", "serve_stdio", "stdio_transport"]

log = logging.getLogger(__name__)

DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024
_READ_CHUNK = 1 << 16
_DRAIN_SECONDS = 10  # at end of input, how long answers to requests already read are awaited
#: The signals that stop the server as end of input does. SIGHUP too: a closed terminal or a
#: dropped ssh session sends it, and its default action killed the server amid a write, the
#: ledger left unclosed (unless it was ignored at start: ``stop_signals``).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def stop_signals() -> tuple[signal.Signals, ...]:
    """``STOP_SIGNALS`` less SIGHUP when this process was started ignoring it (``nohup``): the
    operator asked that a closed terminal not stop the server, and a handler would undo that."""
    if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        return tuple(s for s in STOP_SIGNALS if s is not signal.SIGHUP)
    return STOP_SIGNALS


#: Requests the server holds at once, answered or not yet written. At this many, nothing more is
#: read until one is answered and its answer written: a gateway that stops reading stdout and
#: goes on writing requests held each one's task and answer in memory (1 GB per 5,000
#: ``tools/list``). Its writes block instead, as a pipe's writer's do.
MAX_OWED = 256


class _Counted(ObjectReceiveStream[Any]):
    """The messages read, as the server takes them: a request is owed an answer
    (``rpcid.Outstanding``) from the moment the server has it. Counted when read instead, a
    request a stop caught on its way to the server was owed for ever, and every such stop waited
    the whole drain. At ``MAX_OWED`` owed, the server takes nothing more until one is settled."""

    def __init__(self, inner: MemoryObjectReceiveStream[Any], owed: rpcid.Outstanding) -> None:
        self._inner, self._owed = inner, owed

    async def receive(self) -> Any:
        await self._owed.room(MAX_OWED)  # the reader waits meanwhile, and reads nothing more
        message = await self._inner.receive()
        if isinstance(message, SessionMessage) and isinstance(
            message.message, types.JSONRPCRequest
        ):
            message.metadata = self._owed.read(message.message.id)
        return message

    async def aclose(self) -> None:
        await self._inner.aclose()


def _encoded(message: SessionMessage) -> bytes:
    """``message`` as one line of JSON. One that cannot be written (a string that is not valid
    Unicode, say) is logged and replaced by an error to the same request, or dropped when it is
    no answer: one bad message must not end the writer, and with it the server."""
    try:
        data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
    except Exception as exc:  # its message may quote the message's text: masked (``_strings``)
        shown = masker(_strings(message.message))
        log_traceback(log, logging.ERROR, exc, shown, "a message could not be written as JSON")
        if not isinstance(message.message, types.JSONRPCResponse | types.JSONRPCError):
            return b""
        request_id = message.message.id
        reply = error_reply(
            request_id if answerable_id(request_id) else None,
            types.INTERNAL_ERROR,
            "internal error: the answer could not be written as JSON",
        )
        data = reply.message.model_dump_json(by_alias=True, exclude_unset=True)
    return data.encode() + b"\n"


def _strings(message: Any) -> Any:
    """What ``message`` (a JSON-RPC model) carries, as plain data for ``masker``: its dump
    without the failing serializer's checks, else its payload as it is (a nested model's
    strings then go unmasked)."""
    try:
        return message.model_dump(mode="python", warnings=False)
    except Exception:
        return [getattr(message, name, None) for name in ("params", "result", "error")]


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
) -> AsyncIterator[tuple[ObjectReceiveStream[Any], MemoryObjectSendStream[Any]]]:
    """Serve JSON-RPC over the process's stdin/stdout (or the given descriptors).

    ``stop_on_signals``: SIGTERM, SIGINT and SIGHUP end the input as end of file does (main
    thread only): nothing more is read, calls already read are answered, then the transport closes.
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
        # SIGTERM (containers, service managers), SIGINT and SIGHUP (a closed terminal) stop the
        # server as end of input does: in-flight calls finish and are answered, then the server
        # exits cleanly. Open until the transport closes: leaving it would give the signals
        # their default action back, and a second one would kill the server amid the calls
        # being finished.
        with anyio.open_signal_receiver(*stop_signals()) as signals:
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
                    error_reply(
                        item.request_id(),
                        types.INVALID_REQUEST,
                        f"message too large: {item.size} bytes; the limit is "
                        f"{max_message_bytes} bytes (max_request_bytes)",
                    )
                )
                continue
            message, refused = parse(item)
            if refused:
                await reply_send.send(message)
                continue
            request = message.message
            if isinstance(request, types.JSONRPCRequest) and handshake.refuses(
                request.method, request.id
            ):
                await reply_send.send(
                    error_reply(request.id, types.INVALID_REQUEST, rpcid.ALREADY_INITIALIZED)
                )
                continue
            await read_send.send(message)  # a request is owed once the server has it (_Counted)

    written = anyio.Event()
    polled = pollable(out_fd)

    async def writer() -> None:
        gone = False  # the client closed its end: read nothing more, finish what was read
        try:
            async with write_recv:
                async for message in write_recv:
                    data = _encoded(message)
                    try:
                        if not gone and data:
                            await _write(out_fd, data, polled)
                    except (BrokenPipeError, ConnectionResetError):
                        gone = True
                        reading.cancel()
                    if message.metadata is TRANSPORT:
                        continue  # the transport's own answer: no request of the server's
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
            yield _Counted(read_recv, outstanding), write_send
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

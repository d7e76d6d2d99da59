"""The server's commands for ``agent-custody-memory``: ``serve``, ``keygen``, ``demo``.

``add_commands`` adds them to the parser; the server itself is imported only when one runs.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from agent_custody_state.cli.common import LEDGER_KINDS, CliError, add_forget_mode_flags
from agent_custody_state.cli.keygen import cmd_keygen
from agent_custody_state.cli.logs import FORMATS, LEVELS
from agent_custody_state.cli.serve_setup import (
    at_least_one,
    delay_seconds,
    every_seconds,
    port_number,
    seconds,
)


def cmd_serve(args: argparse.Namespace) -> int:
    import anyio

    from agent_custody_state.cli.common import check_location, is_path, without_password
    from agent_custody_state.cli.serve_setup import announce, load, stdin_problem
    from agent_custody_state.config import ConfigError
    from agent_custody_state.ledger.backend import EventBackendError
    from agent_custody_state.ledger.errors import LedgerError
    from agent_custody_state.plugins import PluginError
    from agent_custody_state.server.http import check_bind, listen
    from agent_custody_state.server.runtime import open_runtime

    sock = None
    config = load(args)
    fmt = config.server.log_format
    try:
        from agent_custody_state.cli.logs import configure_logging

        configure_logging(config.server.log_level, fmt)
        if config.ledger and is_path(config.ledger):
            check_location(config.ledger, must_exist=False)
        if config.server.transport == "http":
            # Checked before the ledger is opened: a refused start leaves nothing behind.
            has_tokens = bool(config.server.tokens) or config.server.oauth is not None
            check_bind(config.server.host, has_tokens=has_tokens)
            sock = listen(config.server.host, config.server.port, config.server.backlog)
        runtime = open_runtime(config)
    except (ConfigError, ValueError) as exc:
        if sock is not None:
            sock.close()
        raise CliError(str(exc)) from None
    except (CliError, LedgerError, EventBackendError, PluginError, OSError):
        if sock is not None:
            sock.close()
        raise
    except Exception as exc:  # a driver's own error, e.g. SQLAlchemy that cannot parse a URL
        if sock is not None:
            sock.close()
        raise CliError(
            f"cannot start: {type(exc).__name__}: {exc} (ledger "
            f"{without_password(config.ledger or '')}); check the location"
        ) from None
    except BaseException:
        if sock is not None:
            sock.close()
        raise
    problem = stdin_problem() if sock is None else None
    if problem is not None:  # every other check first; the event loop would fail on it
        runtime.discard()
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        server = _build_server(config, runtime)
    except ValueError as exc:
        if sock is not None:
            sock.close()
        runtime.discard()
        raise CliError(str(exc)) from None
    try:
        stopping = threading.Event()
        if sock is not None:

            async def serve_http() -> None:
                await resume_outbox(server.memory.memory, fmt)
                await server.serve(sock=sock, on_bound=lambda s: announce(runtime, s.url, fmt))

            with _graceful_stop(stopping, server.request_stop):
                anyio.run(serve_http)
        else:
            from agent_custody_state.server.stdio import serve_stdio

            async def serve_over_stdio() -> None:
                await resume_outbox(server.memory, fmt)
                async with server.resuming():  # owed work, while serving
                    await serve_stdio(
                        server,
                        max_message_bytes=config.server.max_request_bytes,
                        stop_requested=stopping,
                    )

            with _graceful_stop(stopping):
                announce(runtime, "stdio", fmt)
                anyio.run(serve_over_stdio)
    finally:
        runtime.close()
    return 0


async def resume_outbox(service: Any, fmt: str) -> None:
    """Before the first call: finish the store removals a crash left owed (``stores.outbox``),
    in the event loop the stores will serve in; one summary line when there were any."""
    from agent_custody_state.cli.logs import console

    done = await service.custody.resume()
    if done is not None and done.summary():
        console(f"agent-custody-memory: {done.summary()}", fmt)


def _build_server(config: Any, runtime: Any) -> Any:
    """The HTTP server object (not started) or the stdio MCP server, from the runtime."""
    if config.server.transport == "http":
        from agent_custody_state.server.http import create_memory_http_server

        return create_memory_http_server(
            runtime.ledger,
            port=config.server.port,
            host=config.server.host,
            tokens=runtime.tokens,
            max_request_bytes=config.server.max_request_bytes,
            max_concurrency=config.server.max_concurrency,
            allowed_hosts=config.server.allowed_hosts or None,
            allowed_origins=config.server.allowed_origins,
            sessions_per_token=config.server.sessions_per_token,
            session_idle_timeout=config.server.session_idle_timeout,
            header_timeout=config.server.header_timeout,
            body_timeout=config.server.body_timeout,
            max_connections=config.server.max_connections,
            backlog=config.server.backlog,
            oauth=runtime.oauth,
            stateless=config.server.stateless,
            shutdown_delay=config.server.shutdown_delay,
            **runtime.server_options(),
        )
    from agent_custody_state.server.app import create_memory_server

    if runtime.tokens:
        from agent_custody_state.cli.logs import console

        console(
            "agent-custody-memory: note: bearer tokens apply to HTTP only; over stdio "
            "the spawning process is the gateway",
            config.server.log_format,
        )
    return create_memory_server(runtime.ledger, **runtime.server_options())


@contextmanager
def _graceful_stop(
    stopping: threading.Event, request_stop: Callable[[int], None] | None = None
) -> Iterator[None]:
    """SIGTERM (and SIGHUP: a closed terminal) stops the server as cleanly as SIGINT: in-flight
    calls finish, the ledger closes (SQLite checkpoints its WAL), the exit status is 0.
    Containers and service managers stop with SIGTERM; uvicorn leaves SIGHUP to this handler. The transports catch both signals while they serve (uvicorn for HTTP, the
    stdio reader). Outside those windows (a signal before the transport listens for it, or
    uvicorn raising it again for the previous handler once it has stopped) this handler takes
    it: it records the stop (``stopping``, which the stdio reader checks when it starts) and asks
    the server to stop, instead of the default action that would kill the process before the
    ledger is closed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(sig: int, _frame: object) -> None:
        stopping.set()
        if request_stop is not None:
            request_stop(sig)  # as uvicorn's handler takes it: a SIGTERM drains first

    from agent_custody_state.server.stdio import stop_signals  # SIGHUP too, unless nohup

    handled = stop_signals()
    previous = {sig: signal.signal(sig, handle) for sig in handled}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def cmd_demo(args: argparse.Namespace) -> int:
    from agent_custody_state.cli.demo import run_demo

    return run_demo(keep=args.keep, color=args.color)


def add_commands(sub: Any) -> None:
    """Add ``serve``, ``keygen`` and ``demo`` to the ``agent-custody-memory`` parser."""
    p = sub.add_parser(
        "serve",
        help="run the MCP memory server (stdio, or Streamable HTTP)",
        description="Serve the ten memory.* tools over stdio (default: the spawning process is "
        "the gateway) or Streamable HTTP at /mcp. Flags override AGENT_CUSTODY_* variables, "
        "which override the config file. Logs go to standard error.",
        epilog="examples:\n"
        "  agent-custody-memory serve --ledger memory.sqlite\n"
        "  agent-custody-memory serve --config memory.toml --http --port 8790 "
        "--token-env MEMORY_TOKEN --log-format json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        help="TOML config file (docs/configuration.md); relative paths in it are relative to it",
    )
    p.add_argument(
        "--ledger",
        metavar="LOCATION",
        help=f"{LEDGER_KINDS}; a new one is created (in an existing folder)",
    )
    p.add_argument(
        "--key",
        metavar="FILE",
        help="Ed25519 private key (PKCS8 PEM, from keygen) to sign results",
    )
    p.add_argument(
        "--forget-key-env",
        metavar="NAME",
        help="environment variable holding the forget key (HMAC digests of forgotten values)",
    )
    add_forget_mode_flags(
        p,
        default="the config's forget_mode, else plain",
        key_store="crypto-shred key store (default: beside the ledger, or <db>_keys for "
        "PostgreSQL)",
    )
    p.add_argument(
        "--checkpoint-every",
        type=at_least_one,
        metavar="N",
        help="sign a chain checkpoint with --key every N events",
    )
    p.add_argument(
        "--certificates",
        metavar="DIR",
        help="keep a signed erasure certificate of every forget and sweep in DIR, "
        "DIR/<factId>.json, asked for or not (needs --key)",
    )
    p.add_argument(
        "--retention",
        metavar="SPEC",
        help="retention windows as space=ISO 8601 duration, e.g. org=P365D,team:*=P90D",
    )
    p.add_argument(
        "--allow-direct",
        action="store_true",
        default=None,
        help="admit calls without a receipt, as claimed (quarantined)",
    )
    p.add_argument("--http", action="store_true", help="serve Streamable HTTP at /mcp")
    p.add_argument(
        "--stateless",
        action="store_true",
        default=None,
        help="HTTP without sessions: several processes behind a load balancer (no subscriptions)",
    )
    p.add_argument(
        "--spaces",
        metavar="A,B*",
        help="stdio: the spaces the spawning process may use (exact names, prefix*); default all",
    )
    p.add_argument("--transport", choices=("stdio", "http"), help=argparse.SUPPRESS)
    p.add_argument("--host", help="HTTP bind address (default 127.0.0.1)")
    p.add_argument("--port", type=port_number, help="HTTP port (default 8790; 0 picks a free one)")
    p.add_argument(
        "--token-env",
        action="append",
        metavar="NAME",
        help="variable holding a gateway bearer token (repeatable)",
    )
    p.add_argument(
        "--direct-token-env",
        action="append",
        metavar="NAME",
        help="variable holding a direct (untrusted) bearer token (repeatable)",
    )
    p.add_argument(
        "--allowed-host",
        action="append",
        metavar="NAME[:PORT]",
        help="another Host name this server answers to (repeatable)",
    )
    p.add_argument(
        "--max-request-bytes",
        type=at_least_one,
        metavar="N",
        help="largest message accepted, in bytes (default 4194304)",
    )
    p.add_argument(
        "--max-concurrency", type=at_least_one, metavar="N", help="HTTP calls in flight (default 8)"
    )
    p.add_argument(
        "--log-level",
        choices=LEVELS,
        help="log from this level up on standard error (default info: one access-log line per "
        "tool call; warning: store failures and compensations only)",
    )
    p.add_argument(
        "--log-format",
        choices=FORMATS,
        help="text (default) or json (one object per line, for a log collector)",
    )
    p.add_argument(
        "--max-value-elements",
        type=at_least_one,
        metavar="N",
        help="largest value memory.write accepts, in elements (default 10000)",
    )
    p.add_argument(
        "--max-value-bytes",
        type=at_least_one,
        metavar="N",
        help="largest value memory.write accepts, in bytes of JSON (default 1 MiB)",
    )
    p.add_argument(
        "--sessions-per-token",
        type=at_least_one,
        metavar="N",
        help="MCP sessions one token may hold; the oldest is ended (default 64)",
    )
    p.add_argument(
        "--session-idle-timeout",
        type=seconds,
        metavar="SECONDS",
        help="end an HTTP session idle this long (default 300)",
    )
    p.add_argument(
        "--header-timeout",
        type=seconds,
        metavar="SECONDS",
        help="close a connection that has not sent its headers (default 10)",
    )
    p.add_argument(
        "--body-timeout",
        type=seconds,
        metavar="SECONDS",
        help="answer 408 to a request body not received in time (default 30)",
    )
    p.add_argument(
        "--max-connections",
        type=at_least_one,
        metavar="N",
        help="open HTTP connections (default 512, kept under ulimit -n)",
    )
    p.add_argument("--backlog", type=at_least_one, metavar="N", help="listen backlog (default 256)")
    p.add_argument(
        "--shutdown-delay",
        type=delay_seconds,
        metavar="SECONDS",
        help="on SIGTERM, keep serving this long with /readyz draining, then stop (default 0)",
    )
    p.add_argument(
        "--resume-every",
        type=every_seconds,
        metavar="SECONDS",
        help="finish owed store removals and cleanups this often while serving (default 300; "
        "0: only at start)",
    )
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("keygen", help="create an Ed25519 key pair for signed results")
    p.add_argument(
        "--out", required=True, metavar="FILE", help="private key path (public: FILE.pub)"
    )
    p.add_argument("--force", action="store_true", help="replace existing files")
    p.set_defaults(func=cmd_keygen)

    p = sub.add_parser("demo", help="a guided tour on a temporary ledger (a few seconds)")
    p.add_argument(
        "--keep", action="store_true", help="keep the temporary ledger and print its path"
    )
    p.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour the tour (default auto: on a terminal, unless NO_COLOR is set)",
    )
    p.set_defaults(func=cmd_demo)

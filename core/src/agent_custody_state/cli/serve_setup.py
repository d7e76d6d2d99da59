"""What ``serve`` checks and says before it serves: its numeric flags' form (a usage error, exit
2, as SPEC 5 gives a flag value of the wrong form), its flags as config overrides, the config
file read with errors that name it, every environment variable it names but that is not set
(in one error), standard input fit for stdio, and the startup lines in the log format.

Everything here runs before the ledger is opened, so a refused start leaves nothing behind.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from typing import Any

from agent_custody_state.cli.common import CliError, UsageError

#: ``[server]`` limits (and ``shutdown_delay``) that have a flag of the same name (``--backlog``).
LIMIT_FLAGS = (
    "max_value_elements",
    "max_value_bytes",
    "sessions_per_token",
    "session_idle_timeout",
    "header_timeout",
    "body_timeout",
    "max_connections",
    "backlog",
    "shutdown_delay",
    "resume_every",
)


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def port_number(text: str) -> int:
    """``--port``: 0 (a free port) to 65535, else a usage error (argparse: exit 2)."""
    number = _whole(text)
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, not {text!r}")
    return number


def at_least_one(text: str) -> int:
    """A count or size flag (``--max-request-bytes``, ``--checkpoint-every`` ...): 1 or more,
    the range the configuration accepts, told as a usage error."""
    number = _whole(text)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {text!r}")
    return number


def seconds(text: str) -> float:
    """A timeout flag: a number of seconds above 0."""
    try:
        number = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not number > 0:  # NaN too
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, not {text!r}")
    return number


def every_seconds(text: str) -> float:
    """``--resume-every``: seconds, 0 (never) or more."""
    try:
        number = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= number < float("inf"):  # NaN too
        raise argparse.ArgumentTypeError(f"must be 0 (never) or more seconds, not {text!r}")
    return number


def delay_seconds(text: str) -> float:
    """``--shutdown-delay``: seconds from 0 to the configuration's bound."""
    from agent_custody_state.config import MAX_SHUTDOWN_DELAY

    try:
        number = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= number <= MAX_SHUTDOWN_DELAY:  # NaN too
        raise argparse.ArgumentTypeError(
            f"must be 0 to {MAX_SHUTDOWN_DELAY:g} seconds, not {text!r}"
        )
    return number


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Only the flags actually given: an absent flag must not mask the file or environment."""
    top = {
        k: getattr(args, k)
        for k in (
            "ledger",
            "key",
            "forget_key_env",
            "forget_mode",
            "key_store",
            "retention",
            "checkpoint_every",
            "certificates",
        )
        if getattr(args, k) is not None
    }
    server: dict[str, Any] = {}
    if args.http:
        server["transport"] = "http"
    if args.transport is not None:
        server["transport"] = args.transport
    for name in (
        "host",
        "port",
        "max_request_bytes",
        "max_concurrency",
        "log_level",
        "log_format",
        *LIMIT_FLAGS,
    ):
        if getattr(args, name) is not None:
            server[name] = getattr(args, name)
    if args.allow_direct:
        server["allow_direct"] = True
    if args.stateless:
        server["stateless"] = True
    if args.spaces:
        server["spaces"] = [s.strip() for s in args.spaces.split(",") if s.strip()]
    if args.allowed_host:
        server["allowed_hosts"] = args.allowed_host
    if args.token_env or args.direct_token_env:
        server["tokens"] = [{"env": n, "role": "gateway"} for n in args.token_env or []] + [
            {"env": n, "role": "direct"} for n in args.direct_token_env or []
        ]
    if server:
        top["server"] = server
    return top


def load(args: argparse.Namespace) -> Any:
    """The configuration: the file, the environment, the flags; an empty ``--ledger`` is said
    to be empty."""
    from agent_custody_state.config import ConfigError, load_config

    if args.ledger is not None and not args.ledger.strip():
        raise CliError("--ledger is empty; name the ledger (a file or a URL)")
    try:
        config = load_config(args.config, **overrides(args))
    except (ConfigError, ValueError) as exc:  # a file not in UTF-8 is named by load_config
        raise CliError(str(exc)) from None
    if config.ledger is not None and not config.ledger.strip():
        raise CliError("the ledger location is empty; name the ledger (a file or a URL)")
    from agent_custody_state.cli.common import check_private_key

    if args.shutdown_delay is not None and config.server.transport != "http":
        raise UsageError(
            "--shutdown-delay applies to HTTP only (a load balancer sees /readyz draining); "
            "add --http, or leave it out: over stdio the server stops when its client closes "
            "stdin"
        )
    check_private_key(config.key)
    _check_files(config)
    missing = unset_variables(config)
    if len(missing) > 1:  # one alone is named by the check that needs it, as before
        raise CliError(
            "environment variables not set: "
            + ", ".join(missing)
            + "; set them (non-empty) or remove them from the configuration"
        )
    return config


def _check_files(config: Any) -> None:
    """The key store, the checkpoints file and the certificates folder the configuration names,
    looked at before the server opens them (``cli.inputs``): not opened or added to unless they
    are what they should be."""
    from agent_custody_state.cli.common import is_path
    from agent_custody_state.cli.inputs import (
        check_checkpoints_file,
        check_folder,
        check_key_store,
    )

    if config.forget_mode == "crypto-shred" and config.key_store and is_path(config.key_store):
        check_key_store(config.key_store, "key_store", may_create=True)
    if config.checkpoints and is_path(config.checkpoints):
        check_checkpoints_file(config.checkpoints, "checkpoints")
    if config.certificates:
        check_folder(config.certificates, "certificates")


def key_output(out: str) -> None:
    """``keygen --out``: a file name in a folder that exists (an empty name, or a folder, was a
    traceback or "already exists; pass --force")."""
    from pathlib import Path

    path = Path(out)
    if not out.strip():
        raise CliError("--out is empty; name the private key file, e.g. --out memory.key")
    if path.is_dir():
        raise CliError(
            f"--out {out} is a folder; name the key file in it, e.g. {path / 'memory.key'}"
        )
    if not path.parent.is_dir():
        raise CliError(
            f"--out {out}: the folder {path.parent} does not exist; create it first (no "
            "command creates a missing folder)"
        )


def unset_variables(config: Any) -> list[str]:
    """Every environment variable the configuration names that is unset or empty, with what
    names it: the forget key, the bearer tokens, the stores' ``*_env`` settings. The server
    would stop at the first; an operator wants the list."""
    named: list[tuple[str, str]] = []
    if config.forget_key_env:
        named.append((config.forget_key_env, "forget_key_env"))
    for i, token in enumerate(config.server.tokens):
        named.append((token.env, f"server.tokens[{i}] ({token.role})"))
    for store in config.stores:
        for key, value in store.settings().items():
            if key.endswith("_env") and isinstance(value, str) and value:
                named.append((value, f"store {store.name} {key}"))
    return [f"{name} ({what})" for name, what in named if not os.environ.get(name, "").strip()]


def stdin_problem() -> str | None:
    """Why standard input cannot carry stdio MCP, or None. /dev/null (cron, systemd, nohup) is
    no client, and the event loop cannot wait on it; a closed descriptor neither. A pipe, a
    socket, a terminal and a regular file are fine."""
    closed = "serve over stdio needs its MCP client on stdin (a pipe); stdin is closed"
    if sys.stdin is None:  # closed when Python started: fd 0 may since name another file
        return closed
    from agent_custody_state.cli import ClosedStdout

    if sys.stdout is None or isinstance(sys.stdout, ClosedStdout):
        return (
            "serve over stdio answers its MCP client on stdout; stdout is closed: start it "
            "from an MCP client, or serve HTTP with --http"
        )
    try:
        mode = os.fstat(0)
    except OSError:
        return closed
    if stat.S_ISCHR(mode.st_mode):
        try:
            null = os.stat(os.devnull)
        except OSError:
            return None
        if mode.st_rdev == null.st_rdev:
            return (
                "serve over stdio needs its MCP client on stdin (a pipe); stdin is "
                f"{os.devnull}: start it from an MCP client, or serve HTTP with --http"
            )
    return None


def announce(runtime: Any, where: str, fmt: str) -> None:
    """The startup line and its warnings (no forget key; a URL ledger with stores and no
    outbox), in the log format."""
    from agent_custody_state.cli.logs import console
    from agent_custody_state.server.runtime import startup_line

    console(startup_line(runtime, where), fmt)
    for warning in runtime.warnings():
        console(warning, fmt)

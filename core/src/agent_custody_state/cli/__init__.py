"""``agent-custody-memory``: the command line (SPEC 5).

Errors print ``error: <message>`` on stderr and exit 1; usage errors exit 2 (argparse). The
ledger's commands live in ``ledger_commands``, the chain's (``verify``, ``checkpoint``) in
``proofs``, the server's (``serve``, ``keygen``, ``demo``) in
``serve``; every command imports what it needs when it runs, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from agent_custody_state.cli import ledger_commands
from agent_custody_state.cli.common import CliError
from agent_custody_state.cli.proofs import add_commands as add_proof_commands
from agent_custody_state.cli.serve import add_commands as add_server_commands
from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.plugins import PluginError

__all__ = ["CliError", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent-custody-memory",
        description="Governed memory for AI agents: the custody ledger and its MCP server.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("plugins", help="list installed plugins, event backends and store types")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=ledger_commands.cmd_plugins)

    p = sub.add_parser("export", help="write every event of a ledger as JSONL")
    p.add_argument("--ledger", required=True, help="an existing ledger (path or URL)")
    p.add_argument(
        "--out",
        required=True,
        metavar="FILE",
        help="the JSONL file to write, or - for standard output",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an existing file, or write through a symbolic link",
    )
    p.set_defaults(func=ledger_commands.cmd_export)

    p = sub.add_parser("import", help="load a JSONL export into an empty ledger")
    p.add_argument("--ledger", required=True)
    p.add_argument("--from", dest="source", required=True)
    p.set_defaults(func=ledger_commands.cmd_import)

    p = sub.add_parser("sweep", help="forget every fact learned before an instant")
    p.add_argument("--ledger", required=True)
    p.add_argument("--before", required=True)
    p.add_argument("--reason", required=True)
    p.add_argument("--space")
    p.add_argument("--actor", default="agent-custody-memory")
    p.add_argument("--no-digest", action="store_true")
    p.add_argument("--forget-key-env", metavar="NAME")
    p.add_argument("--config", help="server config file: also remove from its stores")
    p.set_defaults(func=ledger_commands.cmd_sweep)

    p = sub.add_parser("repair", help="move a torn final JSONL line aside")
    p.add_argument("--ledger", required=True)
    p.set_defaults(func=ledger_commands.cmd_repair)

    add_proof_commands(sub)
    add_server_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (CliError, LedgerError, EventBackendError, PluginError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except UnicodeDecodeError as exc:
        print(
            f"error: not UTF-8 text (byte {exc.start} is {exc.object[exc.start : exc.start + 1]!r}"
            "); save the file as UTF-8",
            file=sys.stderr,
        )
        return 1
    except OSError as exc:
        print(f"error: {describe_os_error(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def describe_os_error(exc: OSError) -> str:
    """``<file>: <what went wrong>`` instead of Python's ``[Errno 21] Is a directory: 'x'``."""
    what = exc.strerror or str(exc)
    return f"{exc.filename}: {what}" if exc.filename else what

"""``agent-custody-memory``: the command line (SPEC 5).

Errors print ``error: <message>`` on stderr and exit 1; usage errors exit 2 (argparse). Each
group of commands lives in its own module and adds itself to the parser through its
``add_commands(sub)``: ``inspect`` (facts, history, timeline, show), ``ledger_commands``
(export, import, repair, plugins), ``sweep``, ``certificates`` (forget, certificate verify), ``proofs`` (verify, checkpoint), ``serve`` (serve, keygen, demo),
``extras`` (blast, explain, pack, review, eval). Every command
imports what it needs when it runs, so ``--help`` stays fast: importing this package imports
neither the server, pydantic, mcp, SQLAlchemy nor rich (a test holds it to that).
"""

from __future__ import annotations

import argparse
import errno
import io
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from agent_custody_state.cli import (
    certificates,
    extras,
    inspect,
    ledger_commands,
    proofs,
    serve,
    sweep,
)
from agent_custody_state.cli.common import CliError, UsageError
from agent_custody_state.cli.textstreams import escaped_streams
from agent_custody_state.controltext import shown
from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.plugins import PluginError
from agent_custody_state.version import __version__

__all__ = ["CliError", "build_parser", "main"]

#: The command groups, in the order ``--help`` lists them.
COMMAND_GROUPS = (inspect, ledger_commands, sweep, certificates, proofs, serve, extras)

_EPILOG = """\
a ledger is a .jsonl file, a .sqlite/.db file or a postgresql://... URL; times are RFC 3339
with an offset, e.g. 2026-01-01T00:00:00Z or 2026-01-01T09:00:00+09:00.

examples:
  agent-custody-memory facts --ledger memory.sqlite --subject user:42
  agent-custody-memory timeline user:42 --ledger memory.sqlite
  agent-custody-memory sweep --config memory.toml --reason "retention" --dry-run
  agent-custody-memory serve --config memory.toml

each command has its own help: agent-custody-memory COMMAND --help (docs/cli.md has more)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent-custody-memory",
        description="Governed memory for AI agents: the custody ledger and its MCP server.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__}", help="print the version"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in COMMAND_GROUPS:
        group.add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    _standard_streams()
    with escaped_streams():  # the caller's streams as they were after (an embedding program)
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return _run(lambda: args.func(args))
    except BaseExceptionGroup as group:
        # A task group (the demo's, a server's) wraps what its task raised: one error is
        # reported as if raised alone (`demo | head` printed the group's traceback).
        leaves = _leaves(group)
        if len(leaves) != 1 or not isinstance(leaves[0], Exception):
            raise
        leaf = leaves[0]
        return _run(lambda: _raise(leaf))


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    found: list[BaseException] = []
    for exc in group.exceptions:
        found += _leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc]
    return found


def _raise(exc: BaseException) -> None:
    raise exc


def _run(command: Callable[[], Any]) -> int:
    """The command's exit status; the errors a user can act on as one ``error:`` line."""
    try:
        return int(command() or 0)
    except (CliError, LedgerError, EventBackendError, PluginError) as exc:
        _error(f"{exc}{_hint(str(exc))}")
        return 2 if isinstance(exc, UsageError) else 1
    except UnicodeDecodeError as exc:
        _error(
            f"not UTF-8 text (byte {exc.start} is {exc.object[exc.start : exc.start + 1]!r}"
            "); save the file as UTF-8"
        )
        return 1
    except BrokenPipeError:
        # `... | head`: the reader left; say nothing more and leave no traceback at exit.
        _silence_stdout()
        return 1
    except OSError as exc:
        _error(describe_os_error(exc))
        return 1
    except KeyboardInterrupt:
        return 130


def _error(message: str) -> None:
    """``error: <message>`` on standard error, one line: a path or a value it names may hold
    a newline (``--ledger $'a\\nb.jsonl'``), shown escaped as JSON escapes it."""
    print(f"error: {shown(message)}", file=sys.stderr)


#: What to do about a driver's message that says only what went wrong.
_HINTS = {
    "no password supplied": "give the password in the URL (postgresql://user:PASSWORD@host/db) "
    "or, to keep it out of files, in PGPASSWORD or ~/.pgpass",
    "file is not a database": "check the path: a .sqlite or .db ledger is a SQLite database",
    # The library's advice, in the command line's words (``forget``, ``sweep``).
    "keep_digest=False": "on the command line, that is --no-digest",
}


def _hint(message: str) -> str:
    if "lone surrogate" in message and sys.getfilesystemencoding() != "utf-8":
        # Arguments decoded by a non-UTF-8 locale (LC_ALL=C, PYTHONCOERCECLOCALE=0): an
        # argument's UTF-8 bytes became surrogates Python could not decode.
        return (
            f"; the locale reads arguments as {sys.getfilesystemencoding()}: run with "
            "LC_ALL=C.UTF-8 (or PYTHONUTF8=1) to pass non-ASCII text"
        )
    return next((f"; {fix}" for text, fix in _HINTS.items() if text in message), "")


def describe_os_error(exc: OSError) -> str:
    """``<file>: <what went wrong>`` instead of Python's ``[Errno 21] Is a directory: 'x'``."""
    what = exc.strerror or str(exc)
    return f"{exc.filename}: {what}" if exc.filename else what


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


CLOSED_STDOUT = (
    "standard output is closed, so nothing can be printed; redirect it instead "
    "(> FILE, or > /dev/null to discard it)"
)


class ClosedStdout(io.TextIOBase):
    """Standard output when the command was started with it closed (``>&-``): every write
    fails as a write to a closed descriptor does, so the command reports it (exit 1) instead
    of a traceback (``sys.stdout`` is None) or an export that says it was written."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, CLOSED_STDOUT)

    def isatty(self) -> bool:
        return False


def _standard_streams() -> None:
    """Descriptors 0, 1 and 2 left closed by the caller are opened on the null device first, so
    no file the command opens takes their number: a server over stdio started with ``>&-``
    wrote its JSON-RPC answers into the ledger's lock file, the first file it opened. Closed
    standard output then refuses every write (``ClosedStdout``); closed standard error
    discards what is written to it (Python printed it on standard output instead)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            try:
                null = os.open(os.devnull, os.O_RDWR)
            except OSError:
                return
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - for the process
    if sys.stdout is None:
        sys.stdout = ClosedStdout()

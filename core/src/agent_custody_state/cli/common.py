"""What every command shares: the one-line error, finding and opening a ledger safely, times.

Commands never create a folder (a missing one is usually an unmounted volume or a typo), and the
commands that only read or clean a ledger (``export``, ``sweep``, ``repair``) never create a
ledger either: before this rule, ``export`` of a mistyped path created an empty ledger and
reported "exported 0 events".
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

_SCHEME = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*:")


class CliError(Exception):
    """A failure reported as ``error: <message>`` with exit status 1."""


def is_path(location: str) -> bool:
    """A file location (not ``postgres://...`` or ``memory:``): what the folder checks apply to."""
    return _SCHEME.match(location) is None


def check_location(location: str, *, must_exist: bool, flag: str = "--ledger") -> None:
    """Refuse a ledger path whose folder is missing, or (``must_exist``) that is not there."""
    if not is_path(location):
        return
    path = Path(location)
    if must_exist and not path.exists():
        raise CliError(
            f"{flag} {location}: no such ledger; check the path (this command "
            "never creates a ledger)"
        )
    if not path.parent.is_dir():
        raise CliError(
            f"{flag} {location}: the folder {path.parent} does not exist; create it "
            "first (ledgers are never created in missing folders)"
        )
    if path.is_dir():
        raise CliError(f"{flag} {location} is a folder; name the ledger file inside it")


def add_forget_mode_flags(parser: argparse.ArgumentParser) -> None:
    """``--forget-mode`` and ``--key-store``, for every command that opens a ledger."""
    parser.add_argument(
        "--forget-mode",
        choices=("plain", "crypto-shred"),
        help="crypto-shred: values encrypted, forget destroys the key (docs/forget.md)",
    )
    parser.add_argument(
        "--key-store",
        metavar="LOCATION",
        help="crypto-shred key store (default: beside the ledger, or <db>_keys for PostgreSQL)",
    )


def open_ledger(args: argparse.Namespace, *, must_exist: bool = True, **kwargs: Any) -> Any:
    """The ledger named by ``--ledger`` (imported lazily: ``--help`` stays fast), in the forget
    mode of ``--forget-mode``/``--key-store`` where the command has them."""
    from agent_custody_state.ledger.ledger import Ledger

    check_location(args.ledger, must_exist=must_exist)
    for flag in ("forget_mode", "key_store"):  # a flag wins over a config file's value
        if getattr(args, flag, None) is not None:
            kwargs[flag] = getattr(args, flag)
    if kwargs.get("key_store") is not None and kwargs.get("forget_mode") is None:
        kwargs["forget_mode"] = "crypto-shred"  # a key store says which mode is meant
    return Ledger(args.ledger, **kwargs)


#: What a ledger location may be (the start of every ``--ledger`` help).
LEDGER_KINDS = "the ledger: a .jsonl or .sqlite/.db file, or postgresql://user@host/db?table=name"
LEDGER_HELP = f"{LEDGER_KINDS}; it must exist (this command never creates one)"

TIME_FORMAT = "RFC 3339 with an offset, e.g. 2026-01-01T00:00:00Z or 2026-01-01T09:00:00+09:00"


def add_ledger_argument(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """``--ledger LOCATION`` with the help every reading command shares."""
    parser.add_argument("--ledger", required=required, metavar="LOCATION", help=LEDGER_HELP)


def add_json_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--json", action="store_true", help=f"print {what} as JSON instead")


def time_option(value: str | None, flag: str) -> str | None:
    """A time flag in the wire form, or a one-line error naming the flag and the format."""
    if value is None:
        return None
    from agent_custody_state.timeutil import TimeFormatError, normalize_time

    try:
        return normalize_time(value)
    except TimeFormatError as exc:
        raise CliError(f"{flag}: {exc}") from None


# -- erasure certificates (``forget --certificate``, ``sweep --certificates``) --


def certificate_key(args: argparse.Namespace, config: Any) -> str | None:
    """``--key``, else the config file's ``key`` (the key that signs results)."""
    return args.key or (config.key if config is not None else None)


def check_output(path: str, flag: str, *, folder: bool = False) -> Path:
    """Refuse an output that exists (a file) or whose folder is missing, before any work."""
    out = Path(path)
    if folder:
        if not out.is_dir():
            raise CliError(f"{flag} {path}: no such folder; create it first")
        return out
    if out.exists():
        raise CliError(f"{flag} {path} already exists; certificates are never overwritten")
    if not out.parent.is_dir():
        raise CliError(f"{flag} {path}: the folder {out.parent} does not exist")
    return out


def write_certificate(path: Path, envelope: dict[str, Any]) -> None:
    """The envelope as pretty JSON, created exclusively (never over another file)."""
    with open(path, "x", encoding="utf-8") as fh:
        fh.write(json.dumps(envelope, indent=2) + "\n")

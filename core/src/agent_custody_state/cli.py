"""``agent-custody-memory``: the command line (SPEC 5).

Errors print ``error: <message>`` on stderr and exit 1; usage errors exit 2 (argparse). The
server's commands (``serve``, ``keygen``, ``demo``) live in ``server.commands`` and are added here.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .eventstore import EventStoreError
from .ledger.errors import LedgerError
from .plugins import PluginError, get_plugin_manager


class CliError(Exception):
    """A failure reported as ``error: <message>`` with exit status 1."""


def _ledger(args: argparse.Namespace, **kwargs: Any) -> Any:
    from .ledger.ledger import Ledger

    return Ledger(args.ledger, **kwargs)


def cmd_plugins(args: argparse.Namespace) -> int:
    manager = get_plugin_manager()
    if args.json:
        data = [
            {"name": p.name, "distribution": p.distribution, "version": p.version,
             "registers": p.registers, "error": p.error}
            for p in manager.plugins.values()
        ]
        print(json.dumps(data, indent=2))
        return 0
    for info in manager.plugins.values():
        status = f"FAILED: {info.error}" if info.error else ", ".join(info.registers) or "nothing"
        print(f"{info.name:<16} {info.distribution} {info.version}  {status}")
    if manager.stores:
        print("\nstore types:")
        for spec in manager.stores.values():
            print(f"  {spec.type_name:<12} ({spec.plugin}) {spec.description}")
            fields = _settings_fields(spec.settings)
            if fields:
                print(f"  {'':<12} settings: {', '.join(fields)}")
    if manager.errors:
        print("\nproblems:")
        for err in manager.errors:
            print(f"  {err}")
    return 0


def _settings_fields(settings: Any) -> list[str]:
    from .plugins import resolve_ref

    if settings is None:
        return []
    try:
        model = resolve_ref(settings)
        return [
            f"{name}{'' if f.is_required() else '?'}" for name, f in model.model_fields.items()
        ]
    except Exception as exc:  # the settings module may need the vendor SDK
        return [f"(unavailable: {type(exc).__name__}: {exc})"]


def cmd_export(args: argparse.Namespace) -> int:
    out = Path(args.out)
    tmp = out.with_name(out.name + ".partial")
    with _ledger(args) as ledger:
        count = 0
        with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
            for event in ledger.export():
                fh.write(event.to_json() + "\n")
                count += 1
        tmp.replace(out)
    print(f"exported {count} events from {ledger.location} to {out}", file=sys.stderr)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from .ledger.model import event_from_dict

    source = Path(args.source)
    if not source.exists():
        raise CliError(f"{source} does not exist")

    def events() -> Any:
        with open(source, encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    yield event_from_dict(json.loads(line))
                except ValueError as exc:
                    raise CliError(f"{source}:{number}: {exc}") from None

    # Read everything first: a bad line must not leave a half-imported ledger.
    batch = list(events())
    with _ledger(args) as ledger:
        count = ledger.import_events(batch)
    print(f"imported {count} events into {ledger.location}", file=sys.stderr)
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    import os

    forget_key = os.environ.get(args.forget_key_env) if args.forget_key_env else None
    with _ledger(args, forget_key=forget_key) as ledger:
        if args.config:
            from .server.commands import sweep_with_stores

            result = sweep_with_stores(ledger, args)
        else:
            res = ledger.sweep(before=args.before, actor=args.actor, reason=args.reason,
                               space=args.space, keep_digest=not args.no_digest)
            result = {
                "forgotten": [
                    {"factId": e.fact_id, "valueDigest": e.value_digest,
                     "digestKind": e.digest_kind}
                    for e in res.forgotten
                ],
                "held": res.held,
            }
    print(json.dumps(result, indent=2))
    return 0


def cmd_repair(args: argparse.Namespace) -> int:
    from .builtins.jsonl import JsonlStore

    with _ledger(args) as ledger:
        store = ledger.store
        if not isinstance(store, JsonlStore):
            print(f"{ledger.location}: {store.kind} ledgers repair themselves on open")
            return 0
        repairs = store.repair()
    print("\n".join(repairs) if repairs else f"{args.ledger}: nothing to repair")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent-custody-memory",
        description="Governed memory for AI agents: the custody ledger and its MCP server.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("plugins", help="list installed plugins, event backends and store types")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_plugins)

    p = sub.add_parser("export", help="write every event of a ledger as JSONL")
    p.add_argument("--ledger", required=True)
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import", help="load a JSONL export into an empty ledger")
    p.add_argument("--ledger", required=True)
    p.add_argument("--from", dest="source", required=True)
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("sweep", help="forget every fact learned before an instant")
    p.add_argument("--ledger", required=True)
    p.add_argument("--before", required=True)
    p.add_argument("--reason", required=True)
    p.add_argument("--space")
    p.add_argument("--actor", default="agent-custody-memory")
    p.add_argument("--no-digest", action="store_true")
    p.add_argument("--forget-key-env", metavar="NAME")
    p.add_argument("--config", help="server config file: also remove from its stores")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("repair", help="move a torn final JSONL line aside")
    p.add_argument("--ledger", required=True)
    p.set_defaults(func=cmd_repair)

    try:
        from .server.commands import add_commands
    except ImportError:
        pass
    else:
        add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (CliError, LedgerError, EventStoreError, PluginError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    # Run the package's module, not this ``__main__`` copy, so exception classes raised by other
    # modules (``from ..cli import CliError``) are the ones ``main`` catches.
    from agent_custody_state.cli import main as _main

    sys.exit(_main())

"""The ledger's own commands: ``plugins``, ``export``, ``import``, ``sweep``, ``repair``.

Each prints what the flows and the ledger report; none holds logic of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from agent_custody_state.cli.common import CliError, check_location, open_ledger
from agent_custody_state.plugins import get_plugin_manager, resolve_ref


def cmd_plugins(args: argparse.Namespace) -> int:
    manager = get_plugin_manager()
    if args.json:
        data = [
            {
                "name": p.name,
                "distribution": p.distribution,
                "version": p.version,
                "registers": p.registers,
                "error": p.error,
            }
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
    if settings is None:
        return []
    try:
        model = resolve_ref(settings)
        return [f"{name}{'' if f.is_required() else '?'}" for name, f in model.model_fields.items()]
    except Exception as exc:  # the settings module may need the vendor SDK
        return [f"(unavailable: {type(exc).__name__}: {exc})"]


def cmd_export(args: argparse.Namespace) -> int:
    from agent_custody_state.cli.output import output_file, resolve_output

    check_location(args.ledger, must_exist=True)
    target = resolve_output(args.out, force=args.force)
    with open_ledger(args) as ledger, output_file(target) as fh:
        count = 0
        for event in ledger.export():
            fh.write(event.to_json() + "\n")
            count += 1
    where = "standard output" if target is None else args.out
    print(f"exported {count} events from {ledger.location} to {where}", file=sys.stderr)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from agent_custody_state.ledger.model import event_from_dict

    source = Path(args.source)
    if not source.is_file():
        raise CliError(
            f"--from {source}: "
            + ("is a folder; name the JSONL export file" if source.is_dir() else "no such file")
        )

    def events() -> Any:
        with open(source, "rb") as fh:
            for number, raw in enumerate(fh, 1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise CliError(
                        f"{source}:{number}: not UTF-8 (byte {exc.start + 1} of the "
                        "line); an export is UTF-8 JSON lines"
                    ) from None
                if not line.strip():
                    continue
                try:
                    yield event_from_dict(json.loads(line))
                except ValueError as exc:
                    raise CliError(f"{source}:{number}: {exc}") from None

    # Read everything first: a bad line must not leave a half-imported ledger.
    check_location(args.ledger, must_exist=False)
    batch = list(events())
    with open_ledger(args, must_exist=False) as ledger:
        count = ledger.import_events(batch)
    print(f"imported {count} events into {ledger.location}", file=sys.stderr)
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    """Sweep through the flows: with ``--config`` the configured stores are cleaned too."""
    import anyio

    from agent_custody_state.config import ConfigError, build_stores, env_secret, load_config
    from agent_custody_state.server.shapes import sweep_shape
    from agent_custody_state.stores.flows import Custody
    from agent_custody_state.stores.storeset import VerifyPolicy
    from agent_custody_state.timeutil import TimeFormatError, normalize_time

    try:
        before = normalize_time(args.before)
    except TimeFormatError as exc:
        raise CliError(f"--before: {exc}") from None
    forget_key = os.environ.get(args.forget_key_env) if args.forget_key_env else None
    check_location(args.ledger, must_exist=True)
    config = None
    mode: dict[str, Any] = {}
    if args.config:
        try:
            config = load_config(args.config)
        except ConfigError as exc:
            raise CliError(str(exc)) from None
        if config.forget_mode == "crypto-shred":
            mode = {"forget_mode": "crypto-shred", "key_store": config.key_store}
    with open_ledger(args, forget_key=forget_key, **mode) as ledger:
        stores: list[Any] = []
        verify = None
        if config is not None:
            try:
                if config.forget_key_env and ledger.forget_key is None:
                    ledger.forget_key = env_secret(config.forget_key_env, "forget_key_env")
                stores = build_stores(config.stores)
            except ConfigError as exc:
                raise CliError(str(exc)) from None
            verify = VerifyPolicy(config.verify.attempts, config.verify.delay_ms / 1000)
        custody = Custody(ledger, stores, verify=verify)
        report = anyio.run(
            lambda: custody.sweep(
                before=before,
                space=args.space,
                actor=args.actor,
                reason=args.reason,
                keep_digest=not args.no_digest,
            )
        )
    print(json.dumps(sweep_shape(report), indent=2))
    problems = report.problems()
    if problems:
        raise CliError(f"erased from the ledger, but still held by {'; '.join(problems)}")
    return 0


def cmd_repair(args: argparse.Namespace) -> int:
    with open_ledger(args) as ledger:
        repairs = ledger.backend.repair()
    if repairs is None:
        print(f"{ledger.location}: {ledger.backend.kind} ledgers repair themselves on open")
    else:
        print("\n".join(repairs) if repairs else f"{args.ledger}: nothing to repair")
    return 0

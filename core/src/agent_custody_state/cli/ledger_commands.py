"""The ledger's own commands: ``export``, ``import``, ``repair``, ``plugins``.

Each prints what the ledger and the plugin manager report; none holds logic of its own.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from agent_custody_state.cli.common import (
    LEDGER_KINDS,
    CliError,
    add_forget_mode_flags,
    add_json_argument,
    add_ledger_argument,
    check_location,
    is_path,
    open_ledger,
)
from agent_custody_state.cli.progress import progress_bars
from agent_custody_state.controltext import shown
from agent_custody_state.plugins import get_plugin_manager, resolve_ref


def cmd_plugins(args: argparse.Namespace) -> int:
    """List plugins; exit 1 when one failed to load (a blocked one is no failure)."""
    manager = get_plugin_manager()
    failed = [p for p in manager.plugins.values() if p.error and not p.blocked]
    if args.json:
        from agent_custody_state.cli.render import print_json

        print_json([_plugin_json(manager, p) for p in manager.plugins.values()])
        for problem in manager.errors:
            print(f"error: {problem}", file=sys.stderr)
        return 1 if failed or manager.errors else 0
    for info in manager.plugins.values():
        if info.blocked:
            status = "blocked (AGENT_CUSTODY_BLOCK_PLUGINS)"
        elif info.error:
            status = f"FAILED: {info.error}"
        else:
            status = ", ".join(info.registers) or "nothing"
        print(f"{info.name:<16} {info.distribution} {info.version}  {status}")
    if manager.stores:
        print("\nstore types:")
        for spec in manager.stores.values():
            print(f"  {spec.type_name:<12} ({spec.plugin}) {spec.description}")
            settings = _settings_schema(spec.settings)
            if "settingsError" in settings:
                print(f"  {'':<12} settings: (unavailable: {settings['settingsError']})")
            elif settings["settings"]:
                names = [f"{f['name']}{'' if f['required'] else '?'}" for f in settings["settings"]]
                print(f"  {'':<12} settings: {', '.join(names)}")
    if manager.errors:
        print("\nproblems:")
        for err in manager.errors:
            print(f"  {err}")
    if failed or manager.errors:
        which = ", ".join(p.name for p in failed) or "see problems above"
        print(f"error: plugins failed to load: {which}", file=sys.stderr)
        return 1
    return 0


def _plugin_json(manager: Any, info: Any) -> dict[str, Any]:
    """One plugin: what it is, whether it loaded, and what it registered (store types with
    their settings)."""
    return {
        "name": info.name,
        "distribution": info.distribution,
        "version": info.version,
        "status": "blocked" if info.blocked else "failed" if info.error else "loaded",
        "registers": info.registers,
        "error": info.error,
        "eventBackends": [
            {
                "name": b.name,
                "schemes": list(b.schemes),
                "suffixes": list(b.suffixes),
                "description": b.description,
            }
            for b in manager.backends.values()
            if b.plugin == info.name
        ],
        "stores": [
            {"type": s.type_name, "description": s.description, **_settings_schema(s.settings)}
            for s in manager.stores.values()
            if s.plugin == info.name
        ],
    }


def _settings_schema(settings: Any) -> dict[str, Any]:
    """``{"settings": [{name, type, required, default, description, path}]}`` of a store
    type's settings model, or ``{"settingsError": ...}`` when it cannot be imported."""
    if settings is None:
        return {"settings": []}
    try:
        from agent_custody_state.settingkeys import is_path_setting, setting_key

        model = resolve_ref(settings)
        fields = []
        for name, field in model.model_fields.items():
            required = field.is_required()
            default = None if required or field.default_factory else field.default
            fields.append(
                {
                    "name": setting_key(name, field, model),
                    "type": _type_name(field.annotation),
                    "required": required,
                    "default": default if _is_json(default) else repr(default),
                    "description": " ".join((field.description or "").split()),
                    "path": is_path_setting(field),
                }
            )
        return {"settings": fields}
    except Exception as exc:  # the settings module may need the vendor SDK
        return {"settingsError": f"{type(exc).__name__}: {exc}"}


def _type_name(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None)
    if text and not getattr(annotation, "__args__", None):
        return str(text)
    return str(annotation).replace("typing.", "")


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def cmd_export(args: argparse.Namespace) -> int:
    from agent_custody_state.cli.output import check_not_own, output_file, resolve_output

    check_location(args.ledger, must_exist=True)
    target = resolve_output(args.out, force=args.force)
    with open_ledger(args) as ledger:
        check_not_own(ledger, target, args.out)
    with open_ledger(args) as ledger, output_file(target) as fh, progress_bars() as bars:
        advance = bars.add("exporting", total=ledger.count() if bars.on else None)
        count = 0
        for event in ledger.export():
            fh.write(event.to_json() + "\n")
            count += 1
            advance(1)
    where = "standard output" if target is None else args.out
    print(shown(f"exported {_events(count)} from {ledger.location} to {where}"), file=sys.stderr)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from agent_custody_state.ledger.errors import LedgerError
    from agent_custody_state.ledger.importcheck import check_export
    from agent_custody_state.ledger.model import event_from_dict

    source = Path(args.source)
    if not source.is_file():
        from agent_custody_state.cli.inputs import not_a_file

        raise CliError(f"--from {source}: {not_a_file(args.source, 'JSONL export file')}")

    def events(advance: Any) -> Any:
        with open(source, "rb") as fh:
            for number, raw in enumerate(fh, 1):
                advance(len(raw))
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
                    event = event_from_dict(json.loads(line), owned=True)
                except ValueError as exc:
                    raise CliError(f"{source}:{number}: {exc}") from None
                except (TypeError, AttributeError) as exc:  # a field of the wrong JSON type
                    raise CliError(f"{source}:{number}: not an event: {exc}") from None
                problem = _id_problem(event)
                if problem is not None:
                    raise CliError(f"{source}:{number}: {problem}")
                yield event

    def counted(batch: list[Any], advance: Any) -> Any:
        for event in batch:
            yield event
            advance(1)

    # Read everything first: a bad line must not leave a half-imported ledger.
    check_location(args.ledger, must_exist=False)
    with progress_bars() as bars:
        batch = list(events(bars.add("reading (bytes)", total=source.stat().st_size)))
        if not batch:  # opening the ledger would create it (and its lock) for nothing
            print(
                f"nothing to import: {source} has no events; {_untouched(args.ledger)}",
                file=sys.stderr,
            )
            return 0
        try:  # the export's own consistency, before the ledger is opened (or created)
            check_export(batch)
        except (LedgerError, TypeError) as exc:
            raise CliError(f"{source}: {exc}; nothing imported") from None
        sealed = _sealed(batch, source)
        if sealed is not None:  # read as values in plain mode, sealed again in crypto-shred
            raise sealed
        with open_ledger(args, must_exist=False, writes=True) as ledger:
            count = ledger.import_events(
                counted(batch, bars.add("importing", total=len(batch))), check_chain=False
            )  # its chain was checked above, before the ledger was opened
    print(f"imported {_events(count)} into {ledger.location}", file=sys.stderr)
    return 0


def _id_problem(event: Any) -> str | None:
    """Why an event's reference to a fact is not an id (a JSON list or object where SPEC 1.2 has
    text), or None: the export's check looks such ids up and would fail with a ``TypeError``."""
    if event.kind == "assert":
        cited, name = event.supersedes, "supersedes"
        if cited is None:
            return None
    else:
        cited, name = getattr(event, "fact_id", None), "factId"
    if isinstance(cited, str):
        return None
    return f"{event.kind} event: {name} must be a fact id (text), not {type(cited).__name__}"


def _untouched(location: str) -> str:
    if is_path(location) and not Path(location).exists():
        return f"{location} not created"
    return f"{location} unchanged"


def _sealed(batch: list[Any], source: Path) -> CliError | None:
    """The refusal of crypto-shred envelopes (an export of a crypto-shred ledger in plain mode):
    a plain ledger would read them as values, a crypto-shred one would seal them again (their
    keys are in the source's key store) and read them back as values too; None when none."""
    from agent_custody_state.ledger.envelope import kid_of

    for event in batch:
        if event.kind == "assert" and kid_of(event.fact.value) is not None:
            return CliError(
                f"{source}: fact {event.fact_id} holds a crypto-shred envelope, not a value (an "
                "export in plain mode of a crypto-shred ledger): export it again without "
                "--forget-mode plain, so that its values are decrypted"
            )
    return None


def cmd_repair(args: argparse.Namespace) -> int:
    # No value is read (flags may say); it cuts a torn line off, so not read-only.
    with open_ledger(args, forget_mode="plain", changes=True) as ledger:
        repairs, kind = ledger.backend.repair(), ledger.backend.kind
    if repairs is None:
        print(f"{ledger.location}: {kind} ledgers repair themselves on open")
    else:
        print("\n".join(repairs) if repairs else f"{args.ledger}: nothing to repair")
    return 0


def add_commands(sub: Any) -> None:
    """Add ``export``, ``import``, ``repair`` and ``plugins`` to the parser."""
    p = sub.add_parser(
        "export",
        help="write every event of a ledger as JSONL (any backend)",
        epilog="example: agent-custody-memory export --ledger memory.sqlite --out audit.jsonl",
    )
    add_ledger_argument(p)
    p.add_argument(
        "--out",
        required=True,
        metavar="FILE",
        help="the JSONL file to write (owner-only, written atomically), or - for standard output",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an existing file, or write through a symbolic link",
    )
    add_forget_mode_flags(p)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser(
        "import",
        help="load a JSONL export into an empty ledger",
        epilog="example: agent-custody-memory import --ledger memory.sqlite --from audit.jsonl",
    )
    p.add_argument(
        "--ledger",
        required=True,
        metavar="LOCATION",
        help=f"{LEDGER_KINDS}; empty or new (a new file is created, never a folder)",
    )
    p.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="FILE",
        help="a JSONL export (one event per line, UTF-8); nothing is written if a line is bad",
    )
    add_forget_mode_flags(p)
    p.set_defaults(func=cmd_import)

    p = sub.add_parser(
        "repair", help="cut off a torn final JSONL line (recorded by length and sha256)"
    )
    add_ledger_argument(p)
    add_forget_mode_flags(p)
    p.set_defaults(func=cmd_repair)

    p = sub.add_parser(
        "plugins",
        help="list installed plugins, event backends and store types (exit 1 if one failed)",
        description="Installed plugins and what each registers. Exits 1 when a plugin failed "
        "to load; a plugin blocked by AGENT_CUSTODY_BLOCK_PLUGINS is shown as blocked and is "
        "no failure.",
    )
    add_json_argument(p, "plugins, event backends and store types with their settings")
    p.set_defaults(func=cmd_plugins)


def _events(count: int) -> str:
    return f"{count} event" if count == 1 else f"{count} events"

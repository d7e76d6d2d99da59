"""``sweep``: forget what is older than a cutoff or the retention windows, ledger and stores.

Runs the flow the memory.sweep tool runs (``Custody.sweep``). With ``--config`` the ledger, the
retention windows, the forget key and the stores come from the server's configuration file, so
a cron job needs only ``sweep --config memory.toml --reason retention``. ``--dry-run`` lists
what would go and changes nothing (not even the stores are contacted). The default output is one
line (``forgot N facts; M on hold, kept``); ``--json`` prints memory.sweep's JSON.

Like the server, a sweep keeps the store removals it owes in the outbox (``<ledger>.outbox``, or
the config's ``outbox``) and first finishes those a crash left (``stores.outbox``).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from agent_custody_state.cli.common import (
    LEDGER_HELP,
    RECORDED,
    TIME_FORMAT,
    CliError,
    add_forget_mode_flags,
    add_json_argument,
    check_location,
    time_option,
)
from agent_custody_state.cli.sweep_unfinished import (
    StopRequest,
    interrupted,
    not_kept,
    plural,
    stopped,
)


def _load(args: argparse.Namespace) -> tuple[Any, str]:
    """The configuration (or None) and the ledger location, flags first."""
    config = None
    if args.config:
        from agent_custody_state.config import ConfigError, load_config

        try:
            config = load_config(args.config)
        except ConfigError as exc:
            raise CliError(str(exc)) from None
    location = args.ledger or (config.ledger if config is not None else None)
    if not location:
        raise CliError("no ledger: give --ledger, or --config with a file that sets `ledger = ...`")
    return config, location


def _retention(config: Any) -> Any:
    from agent_custody_state.ledger.retention import RetentionPolicy

    if config is None or not config.retention:
        return None
    return RetentionPolicy.parse(config.retention)


def _forget_key(args: argparse.Namespace, config: Any) -> str | None:
    name = args.forget_key_env or (config.forget_key_env if config is not None else None)
    if not name:
        return None
    value = os.environ.get(name)
    if not value:
        source = "--forget-key-env" if args.forget_key_env else f"forget_key_env in {args.config}"
        raise CliError(f"the forget key variable {name} is not set (named by {source})")
    return value


def cmd_sweep(args: argparse.Namespace) -> int:
    import anyio

    from agent_custody_state.stores.flows import Custody
    from agent_custody_state.stores.sweep_stopped import swept_before

    before = time_option(args.before, "--before")
    at = time_option(args.at, "--at")
    if at is not None and before is not None:
        raise CliError("--at measures the retention windows; it does not go with --before")
    config, location = _load(args)
    retention = _retention(config) if before is None else None
    if before is None and retention is None:
        raise CliError(
            "sweep needs --before TIME, or --config with a file that sets retention windows "
            '(retention = "org=P365D,team:*=P90D")'
        )
    check_location(location, must_exist=True)
    mode = _forget_mode(args, config)
    if args.dry_run:
        with open_mode(location, mode, reads_only=True) as ledger:  # changes nothing
            custody = Custody(ledger, retention=retention)
            holders = bool(config is not None and config.stores)
            at = custody.measured_at(at) if before is None else None  # shown: a sweep's --at
            preview = anyio.run(
                lambda: custody.plan_sweep(before=before, space=args.space, holders=holders, at=at)
            )
        return _print_preview(preview, args.json, at)
    from agent_custody_state.cli.common import certificate_key, check_output

    key = certificate_key(args, config)
    folder = (
        check_output(args.certificates, "--certificates", folder=True)
        if args.certificates
        else None
    )
    if folder is not None and key is None:
        raise CliError("--certificates needs --key K (or key = ... in the --config file)")
    if folder is None:  # the --config file's folder, as the server keeps them
        from agent_custody_state.cli.certfile import configured_archive

        folder = configured_archive(config, key)
    forget_key = _forget_key(args, config)
    stores, verify = _stores(config)
    outbox = _outbox(location, config)
    from agent_custody_state.stores.archive import CertificateArchive

    archive = CertificateArchive(folder) if folder is not None else None
    with open_mode(location, mode, forget_key=forget_key) as ledger:
        from agent_custody_state.cli.progress import progress_bars

        custody = Custody(
            ledger,
            stores,
            retention=retention,
            verify=verify,
            certificate_key=key,
            outbox=outbox,
            certificates=archive,  # each kept as issued: an interrupted sweep keeps its own
        )
        resumed = anyio.run(custody.resume)
        if resumed is not None and resumed.summary():
            print(f"agent-custody-memory: {resumed.summary()}", file=sys.stderr)
        with StopRequest().installed() as stop:  # until the output is written, also a success's
            try:
                with progress_bars() as bars:
                    progress = bars.stages(
                        {"ledger": "forgetting", "stores": "removing from stores"}
                    )
                    report = anyio.run(
                        lambda: custody.sweep(
                            before=before,
                            space=args.space,
                            actor=args.actor,
                            reason=args.reason,
                            keep_digest=not args.no_digest,
                            progress=progress,
                            certificates=folder is not None,
                            at=at,
                            stop=stop,
                        )
                    )
            except KeyboardInterrupt as exc:  # exit 130 (143: SIGTERM), saying what stands
                stop.finishing()  # a second Ctrl-C raised outside the flow carries no report:
                swept = getattr(exc, "swept", None) or stop.swept  # the flow handed it over
                if args.json and swept is not None:  # what it did, marked as interrupted
                    _print_json(swept, folder is not None, interrupted=stop.signal or "SIGINT")
                told = interrupted(exc, swept, archive, custody.outbox, bool(stores))
                print(f"agent-custody-memory: {told}", file=sys.stderr)
                return stop.status()
            except Exception as exc:
                stop.finishing()
                swept = swept_before(exc)
                if swept is None:
                    raise  # it forgot nothing: the error says it all
                if args.json:  # what it did, as memory.sweep's second text item says it
                    _print_json(swept, folder is not None)
                raise CliError(stopped(exc, swept, archive, printed=args.json)) from None
            stop.finishing()  # it ended: one more Ctrl-C is noted, it cannot cut the output
            return _finished(report, args, bool(stores), archive, folder is not None)


def _finished(
    report: Any, args: argparse.Namespace, stores: bool, archive: Any, certified: bool
) -> int:
    """The output of a sweep that ran to its end: its line or ``--json``, then exit 1 (a
    ``CliError``) if a store still holds a value or a certificate could not be kept."""
    if args.json:
        _print_json(report, certified)
    else:
        removed = sum(1 for s in report.forgotten if s.removal.removed_from)
        line = f"forgot {plural(len(report.forgotten), 'fact')}; {len(report.held)} on hold, kept"
        if stores:
            line += f"; {removed} removed from the stores"
        print(line)
    problems = report.problems()
    unkept = not_kept(report, archive, printed=args.json)
    if problems:
        from agent_custody_state.server.handlers import SWEEP_STILL_HELD

        raise CliError(f"{SWEEP_STILL_HELD}{'; '.join(problems)}{unkept}")
    if unkept:
        raise CliError(unkept.removeprefix("; "))
    return 0


def _print_json(report: Any, certified: bool, interrupted: str | None = None) -> None:
    """memory.sweep's JSON of ``report`` (``sweep_shape``); ``certified``: each forgotten fact
    with its ``certificate``, as in the tool's structured content (``shapes.with_certificates``),
    so one kept nowhere else is printed (``sweep_unfinished.not_kept``). ``interrupted``: the
    signal that stopped the sweep, added as ``interrupted`` (a finished sweep has no such key)."""
    from agent_custody_state.cli.render import print_json
    from agent_custody_state.server.shapes import sweep_shape

    data = sweep_shape(report)
    if interrupted is not None:
        data["interrupted"] = interrupted
    if certified:
        for item, swept in zip(data["forgotten"], report.forgotten, strict=True):
            if swept.certificate is not None:
                item["certificate"] = swept.certificate
    print_json(data)


def _forget_mode(args: argparse.Namespace, config: Any) -> dict[str, Any]:
    """``forget_mode``/``key_store`` from the config file, overridden by the flags; empty when
    neither names a mode (the ledger is then opened in the mode it records: ``open_mode``)."""
    mode: dict[str, Any] = {}
    if config is not None and config.forget_mode == "crypto-shred":
        mode = {"forget_mode": "crypto-shred", "key_store": config.key_store}
    elif config is not None and "forget_mode" in config.model_fields_set:
        mode = {"forget_mode": config.forget_mode}
    for flag in ("forget_mode", "key_store"):
        if getattr(args, flag, None) is not None:
            mode[flag] = getattr(args, flag)
    if mode.get("key_store") is not None and mode.get("forget_mode") is None:
        mode["forget_mode"] = "crypto-shred"  # a key store says which mode is meant
    return mode


def open_mode(location: str, mode: dict[str, Any], **kwargs: Any) -> Any:
    """The ledger in ``mode`` (``_forget_mode``), or in the mode it records when none is named,
    for a command that forgets (``sweep``, ``forget``, ``certificate reapply``). It writes no
    value, so it never changes the ledger's mode (``open_recorded``'s ``read_only``): no key
    store is created and no mark recorded, and a refused forget leaves every file of the ledger
    byte-identical. Crypto-shred mode asked of a ledger that records plain mode is refused
    unless a key store that exists is named (a ledger from before the mark, keys elsewhere)."""
    from agent_custody_state.cli.common import open_recorded

    return open_recorded(location, read_only=True, **mode, **kwargs)


def _outbox(location: str, config: Any) -> Any:
    """The outbox's path (``stores.outbox``), checked before the ledger is opened: the config's
    ``outbox``, else ``<ledger>.outbox`` beside a file ledger; None for a URL ledger without
    one. ``Custody`` opens it, its lock waited for as long as the ledger's (``Outbox.of``)."""
    from agent_custody_state.stores.outbox import Outbox, outbox_path

    path = outbox_path(location, config.outbox if config is not None else None)
    if path is None:
        return None
    try:
        return Outbox(path).path  # a folder that does not exist is refused now
    except ValueError as exc:
        raise CliError(str(exc)) from None


def _stores(config: Any) -> tuple[list[Any], Any]:
    if config is None or not config.stores:
        return [], None
    from agent_custody_state.config import ConfigError
    from agent_custody_state.storebuild import build_stores
    from agent_custody_state.stores.storeset import VerifyPolicy

    try:
        stores = build_stores(config.stores)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    return stores, VerifyPolicy(config.verify.attempts, config.verify.delay_ms / 1000)


def _print_preview(preview: Any, as_json: bool, at: str | None) -> int:
    facts = [e.fact for e in preview.forget]
    if as_json:
        from agent_custody_state.cli.render import print_json

        print_json(
            {
                "dryRun": True,
                "before": preview.before,
                "retention": preview.retention.as_dict() if preview.retention else None,
                "space": preview.space,
                "measuredAt": at,
                "wouldForget": [
                    {
                        "factId": e.fact_id,
                        "subject": e.fact.subject,
                        "predicate": e.fact.predicate,
                        "space": e.fact.space,
                        "txTime": e.tx_time,
                        "stores": preview.holders.get(e.fact_id, []),
                    }
                    for e in preview.forget
                ],
                "held": preview.held,
            }
        )
        return 0
    for event in preview.forget:
        fact = event.fact
        holders = preview.holders.get(fact.fact_id)
        where = f"  stores: {', '.join(holders)}" if holders else ""
        print(
            f"would forget {fact.fact_id}  {fact.space}  learned {event.tx_time}  "
            f"{fact.subject} {fact.predicate}{where}"
        )
    for fact_id in preview.held:
        print(f"would keep   {fact_id}  (on legal hold)")
    print(f"dry run: would forget {plural(len(facts), 'fact')}; {len(preview.held)} on hold, kept")
    if at is not None:
        print(f"windows measured at {at}: sweep with --at {at} to forget exactly these")
    return 0


def add_commands(sub: Any) -> None:
    """Add ``sweep`` to the parser."""
    p = sub.add_parser(
        "sweep",
        help="forget every fact learned before a cutoff, or past its retention window",
        description="Forget (erase the value of) every fact the ledger learned before --before, "
        "or, with --config and no --before, before its space's retention window; held facts are "
        "kept. With --config the configured stores are cleaned too. Prints one line; --json "
        "prints memory.sweep's JSON. Exit 1 if a store could not remove a fact, a certificate "
        "asked for could not be kept, or a fact stopped the sweep part-way.",
        epilog="examples:\n"
        "  agent-custody-memory sweep --ledger memory.sqlite --before 2026-01-01T00:00:00Z "
        "--reason 'retention'\n"
        "  agent-custody-memory sweep --config memory.toml --reason 'nightly retention' "
        "--dry-run",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--ledger",
        metavar="LOCATION",
        help=LEDGER_HELP + "; default: the config file's ledger",
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        help="the server's TOML config: its ledger, retention windows, forget key and stores",
    )
    p.add_argument(
        "--before",
        metavar="TIME",
        help=f"forget what was learned before this instant; {TIME_FORMAT}; "
        "default: the config's retention windows",
    )
    p.add_argument(
        "--at",
        metavar="TIME",
        help="measure the retention windows from this instant, not now (a dry run's "
        f"measuredAt, so the sweep forgets what it listed); {TIME_FORMAT}; never after now",
    )
    p.add_argument("--reason", required=True, help="recorded on every forget event, e.g. retention")
    p.add_argument("--space", help="only this space, e.g. team:support")
    p.add_argument(
        "--actor",
        default="agent-custody-memory",
        help="recorded on every forget event (default agent-custody-memory)",
    )
    p.add_argument(
        "--no-digest",
        action="store_true",
        help="leave no value digest on the forgotten facts (digestKind none)",
    )
    p.add_argument(
        "--forget-key-env",
        metavar="NAME",
        help="environment variable holding the forget key (HMAC digests); default: the config's",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="list what would be forgotten and kept; change nothing, contact no store",
    )
    p.add_argument(
        "--certificates",
        metavar="DIR",
        help="write a signed erasure certificate per forgotten fact, DIR/<factId>.json",
    )
    p.add_argument("--key", metavar="K", help="Ed25519 private key that signs the certificates")
    add_json_argument(p, "memory.sweep's JSON (with --dry-run: the facts that would go)")
    add_forget_mode_flags(p, default=f"the --config file's forget_mode, else {RECORDED}")
    p.set_defaults(func=cmd_sweep)

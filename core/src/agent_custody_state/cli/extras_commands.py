"""What ``blast``, ``explain``, ``pack``, ``review`` and ``eval`` do when they run.

Every check of the flags comes before any work, so a refused command reads, creates and changes
nothing. Outputs are the original's (SPEC-EXTRAS 2 to 7): text, or pretty JSON with ``--json``;
signed files are pretty DSSE envelopes written atomically, never over an existing file without
``--force``.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from agent_custody_state.cli.common import CliError, UsageError, check_location, open_ledger
from agent_custody_state.cli.output import check_not_input
from agent_custody_state.controltext import shown
from agent_custody_state.extras.jsview import parse, pretty
from agent_custody_state.extras.verify import VerifyOptions
from agent_custody_state.keys import KeyFileError, KeyPair, PublicKeyRef
from agent_custody_state.signing import well_formed


def _public(paths: list[str] | None) -> list[PublicKeyRef]:
    from agent_custody_state.keys import load_public_ref

    try:
        return [load_public_ref(p) for p in paths or []]
    except KeyFileError as exc:
        raise CliError(str(exc)) from None


def _private(path: str) -> KeyPair:
    from agent_custody_state.keys import load_key_pair

    try:
        return load_key_pair(path)
    except KeyFileError as exc:
        raise CliError(str(exc)) from None


def receipt_keys(args: argparse.Namespace) -> VerifyOptions | None:
    """The receipts are verified only when at least one ``--issuer-key`` is given."""
    if not args.issuer_key:
        return None
    log_keys = getattr(args, "log_key", None)
    return VerifyOptions(
        issuer_keys=_public(args.issuer_key),
        principal_keys=_public(args.principal_key),
        log_keys=_public(log_keys) if log_keys else None,
        log_id=getattr(args, "log_id", None),
    )


def _receipts_dir(path: str) -> str:
    from agent_custody_state.extras.bundles import load_directory

    load_directory(path)  # the OS's own error, e.g. "receipts/: No such file or directory"
    return path


def _ledger(args: argparse.Namespace, *, changes: bool = False) -> AbstractContextManager[Any]:
    """The ``--ledger`` given (never created), or nothing; read-only unless the command
    ``changes`` it (``blast --retract --apply``)."""
    if not args.ledger:
        return nullcontext(None)
    check_location(args.ledger, must_exist=True)
    return open_ledger(args, changes=changes)  # type: ignore[no-any-return]


def _read_envelope(path: str) -> Any:
    try:
        return parse(Path(path).read_bytes())
    except ValueError as exc:
        raise CliError(f"{path}: not JSON ({exc})") from None


def _target(args: argparse.Namespace) -> Path | None:
    from agent_custody_state.cli.output import resolve_output

    return resolve_output(args.out, force=args.force)


def _write(target: Path | None, envelope: Any) -> None:
    from agent_custody_state.cli.output import output_file

    with output_file(target) as fh:
        fh.write(pretty(envelope))


def _say(text: str) -> None:
    print(well_formed(text))


# -- blast ----------------------------------------------------------------------------------------


def cmd_blast(args: argparse.Namespace) -> int:
    from agent_custody_state.extras import retract
    from agent_custody_state.extras.blast import blast_radius, format_blast
    from agent_custody_state.extras.bundles import load_summaries

    if not (args.ledger and args.receipts and args.fact):
        raise CliError("blast needs --ledger, --receipts, and --fact")
    if args.apply and not args.retract:
        raise CliError("blast --apply needs --retract")
    if args.retract and args.apply and not args.reason:
        raise CliError("blast --retract --apply needs --reason <why>")
    if args.config and not args.apply:
        raise CliError("blast --config names the stores --retract --apply cleans; add both")
    stores, verify = _stores(args.config) if args.config else ([], None)
    summaries = load_summaries(_receipts_dir(args.receipts))
    with _ledger(args, changes=bool(args.retract and args.apply)) as ledger:
        b = blast_radius(ledger, summaries, args.fact)
        if b.fact is None:
            raise CliError(f"--fact {args.fact}: not in this ledger; check the fact id")
        report = None
        if args.retract and b.fact is not None:
            options = dict(actor=args.actor, reason=args.reason or "", receipt_id=args.receipt_id)
            if args.apply:
                import anyio

                from agent_custody_state.stores.flows import Custody

                custody = Custody(ledger, stores, verify=verify)
                report = anyio.run(lambda: retract.apply(custody, b, **options))
            else:
                report = retract.plan(b, **options)
    if args.json:
        data = b.to_dict()
        if report is not None:
            data["retract"] = report.to_dict()
        _say(pretty(data))
    else:
        _say(format_blast(b, args.fact))
        if report is not None:
            _say("\n" + retract.format_report(report))
    if report is not None and report.problems():
        raise CliError(f"not everything was undone: {'; '.join(report.problems())}")
    return 0


def _stores(config_path: str) -> tuple[list[Any], Any]:
    from agent_custody_state.config import ConfigError, load_config
    from agent_custody_state.storebuild import build_stores
    from agent_custody_state.stores.storeset import VerifyPolicy

    try:
        config = load_config(config_path)
        stores = build_stores(config.stores)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    return stores, VerifyPolicy(config.verify.attempts, config.verify.delay_ms / 1000)


# -- explain --------------------------------------------------------------------------------------


def cmd_explain(args: argparse.Namespace) -> int:
    from agent_custody_state.extras.actionpack import sign_action_pack, verify_action_pack
    from agent_custody_state.extras.bundles import BundleError
    from agent_custody_state.extras.explain import build_action_pack, erasures, format_explain
    from agent_custody_state.extras.verify import verify_bundle

    if args.verify:
        if not args.key:
            raise CliError("explain --verify needs --key <pub>")
        pack_keys, keys = _public(args.key), receipt_keys(args)
        result = verify_action_pack(_read_envelope(args.verify), pack_keys, keys)
        if args.json:
            _say(pretty(_verification_json(result, receipt=True)))
        else:
            lines = result.lines()
            if result.pack is not None:
                lines += ["", _explained(format_explain, result.pack, result.receipt)]
            _say("\n".join(lines + result.as_built()))
        return 0 if result.ok else 1
    if not (args.receipts and args.receipt):
        raise CliError("explain needs --receipts and --receipt, or --verify")
    if args.out and not args.sign:
        raise CliError("explain --out needs --sign <key>")
    keys = receipt_keys(args)
    signer = _private(args.sign) if args.out else None
    target = _target(args) if args.out else None
    with _ledger(args) as ledger:
        check_not_input(target, args, ledger)
        try:
            pack = build_action_pack(_receipts_dir(args.receipts), args.receipt, ledger)
        except BundleError as exc:
            raise CliError(f"receipt {args.receipt}: not a receipt bundle: {exc}") from None
        erased = erasures(ledger)  # after the pack: a forget meanwhile is hidden too
    verification = verify_bundle(pack["receipt"], keys) if keys is not None else None
    signed = sign_action_pack(pack, signer) if signer is not None else None  # refused: no output
    if args.json:
        _say(pretty({"pack": pack, "verification": _result_json(verification)}))
    else:
        _say(format_explain(pack, verification, ledger is not None, erased))
    if signed is not None:
        _write(target, signed)
        print(f"signed action pack written to {args.out}", file=sys.stderr)
    if verification is not None and not verification.ok:
        return 1
    return 1 if pack["missingReceipts"] else 0


def _explained(format_explain: Any, pack: Any, receipt: Any) -> str:
    try:
        return str(format_explain(pack, receipt, True))
    except ValueError as exc:  # a pack whose receipt cannot be decoded: the checks said so
        return f"(the receipt inside the pack cannot be read: {exc})"


def _result_json(result: Any) -> Any:
    return None if result is None else result.to_dict()


def _verification_json(result: Any, *, receipt: bool) -> dict[str, Any]:
    out = {"ok": result.ok, "checks": [c.to_dict() for c in result.checks], "pack": result.pack}
    if receipt:
        out["receipt"] = _result_json(result.receipt)
    return out


# -- pack -----------------------------------------------------------------------------------------


def cmd_pack(args: argparse.Namespace) -> int:
    from agent_custody_state.extras import pack as custody

    if args.verify:
        if not args.key:
            raise CliError("pack --verify needs --key <pub>")
        pack_keys, keys = _public(args.key), receipt_keys(args)
        result = custody.verify_pack(_read_envelope(args.verify), pack_keys, keys)
        if args.json:
            _say(pretty(_verification_json(result, receipt=False)))
        else:
            lines = result.lines()
            if result.pack is not None:
                lines += ["", custody.format_pack(result.pack)]
            _say("\n".join(lines + result.as_built()))
        return 0 if result.ok else 1
    if not (args.ledger and args.receipts and args.fact and args.out and args.sign):
        raise CliError("pack needs --ledger, --receipts, --fact, --out, and --sign")
    signer = _private(args.sign)
    receipts = _receipts_dir(args.receipts)
    check_location(args.ledger, must_exist=True)
    target = _target(args)
    with _ledger(args) as ledger:
        check_not_input(target, args, ledger)
        if ledger.get(args.fact) is None:
            raise CliError(f"--fact {args.fact}: not in this ledger; no pack written")
        pack = custody.build_pack(ledger, receipts, args.fact)
    _write(target, custody.sign_pack(pack, signer))
    _say(pretty(pack) if args.json else custody.format_pack(pack) + custody.held_note(pack))
    print(f"signed pack written to {args.out}", file=sys.stderr)
    return 1 if pack["missingReceipts"] else 0


# -- review ---------------------------------------------------------------------------------------


def cmd_review(args: argparse.Namespace) -> int:
    from agent_custody_state.extras.review import ReviewOptions

    if not args.receipts:
        raise CliError("review needs --receipts")
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: a port is 0 to 65535")
    keys = receipt_keys(args)
    receipts = _receipts_dir(args.receipts)
    if args.out:
        out = Path(args.out)
        if out.exists() and not out.is_dir():
            raise CliError(f"--out {args.out} is a file; name a folder")
        if not out.parent.is_dir():
            raise CliError(f"--out {args.out}: the folder {out.parent} does not exist; create it")
    with _ledger(args) as ledger:
        options = ReviewOptions(receipts, ledger, keys, args.title)
        if args.out:
            from agent_custody_state.extras.review_server import write_review

            written = write_review(options, args.out)
            _say(shown(f"wrote {written['receipts']} receipt page(s) and the index to {args.out}"))
            return 0
        from agent_custody_state.cli.review_serve import serve_review

        return serve_review(options, args)


# -- eval -----------------------------------------------------------------------------------------


def cmd_eval(args: argparse.Namespace) -> int:
    from agent_custody_state.extras import evalfile, evals

    if args.verify:
        if not args.key:
            raise CliError("eval --verify needs --key <pub>")
        predicate, keyid, error = evalfile.verify_report(
            _read_envelope(args.verify), _public(args.key)
        )
        if predicate is None:
            _say(f"NOT VERIFIED: {error}")
            return 1
        from agent_custody_state.extras.jsview import at, text

        names = at(predicate, "scenarioNames")
        _say(
            f"VERIFIED  signed by {keyid[:12]}  system {text(at(predicate, 'system'))}  ran "
            f"{text(at(predicate, 'ranAt'))}  scenarios {len(names) if isinstance(names, list) else 0} "
            f"(digest {text(at(predicate, 'scenariosDigest'))[:12]})"
        )
        _say(evals.format_report(at(predicate, "report")))
        return 0
    if args.sign and not args.out:
        raise CliError("eval --sign needs --out <report.json>")
    if args.out and not args.sign:
        raise CliError("eval --out needs --sign <key>")
    signer = _private(args.sign) if args.sign else None
    target = _target(args) if args.out else None
    try:
        scenarios = evalfile.load_scenarios(args.scenarios) if args.scenarios else evals.SCENARIOS
    except evalfile.ScenarioFileError as exc:
        raise CliError(str(exc)) from None
    report = _run_ledger(scenarios)
    baseline = evals.run_all(evals.OverwriteStore(), scenarios) if args.baseline else None
    if args.json:
        _say(pretty({"ledger": report, "baseline": baseline}))
    else:
        _say("The ledger:\n" + evals.format_report(report))
        if baseline is not None:
            _say("\nA naive overwrite store:\n" + evals.format_report(baseline))
    if signer is not None:
        _write(target, evalfile.sign_report(evalfile.SYSTEM, scenarios, report, signer))
        print(f"signed report written to {args.out}", file=sys.stderr)
    return 1 if evals.regressed(report) else 0


def _run_ledger(scenarios: list[dict[str, Any]]) -> dict[str, Any]:
    """The scenarios on a fresh JSONL ledger in a new temporary folder, removed afterwards."""
    import tempfile

    from agent_custody_state.extras import evals
    from agent_custody_state.ledger.ledger import Ledger

    with tempfile.TemporaryDirectory(prefix="agent-custody-eval-") as folder:
        with Ledger(Path(folder) / "ledger.jsonl") as ledger:
            return evals.run_all(evals.LedgerUnderTest(ledger), scenarios)

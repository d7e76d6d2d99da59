"""The operator's commands: ``blast``, ``explain``, ``pack``, ``review``, ``eval`` (SPEC-EXTRAS 7).

``add_commands`` adds them to the ``agent-custody-memory`` parser. Flags are the original's
(``--flag=value`` works too, abbreviations do not); a missing flag is the original's one-line
error with exit 1, a wrong or unknown flag a usage error with exit 2 (SPEC 5). The work lives
in ``extras_commands``, imported only when one of these commands runs.
"""

from __future__ import annotations

import argparse
from typing import Any

from agent_custody_state.cli.common import add_forget_mode_flags

KEY_HELP = "a public key file (SPKI PEM, e.g. gateway.pub); repeatable"


def _run(name: str) -> Any:
    def run(args: argparse.Namespace) -> int:
        from agent_custody_state.cli import extras_commands
        from agent_custody_state.cli.common import CliError
        from agent_custody_state.extras.signed import SignedTooDeep

        try:
            return int(getattr(extras_commands, name)(args))
        except SignedTooDeep as exc:  # a signed file, or a pack, too deep to read back
            where = getattr(args, "verify", None)
            raise CliError(f"{where}: {exc}" if where else str(exc)) from None

    return run


def _receipt_keys(p: argparse.ArgumentParser, *, log: bool = True) -> None:
    p.add_argument(
        "--issuer-key",
        action="append",
        metavar="PUB",
        help="the gateway's public key: with it every receipt is verified; repeatable",
    )
    p.add_argument(
        "--principal-key",
        action="append",
        metavar="PUB",
        help="the principal's public key (checks the signed grant); repeatable",
    )
    if log:
        p.add_argument(
            "--log-key",
            action="append",
            metavar="PUB",
            help="the public key of a log run by someone else (checks tree heads); repeatable",
        )


def _parser(sub: Any, name: str, summary: str, description: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=summary, description=description, allow_abbrev=False
    )
    return parser


def add_commands(sub: Any) -> None:
    """Add the five commands to the ``agent-custody-memory`` parser."""
    p = _parser(
        sub,
        "blast",
        "everything that relied on a fact: later calls, derived beliefs (--retract undoes them)",
        "The blast radius of one fact through the receipts: every later call made after the "
        "agent was shown it (or a belief derived from it) and every belief written in those "
        "calls. Exit 0 if the fact is in the ledger, else 1. Example: agent-custody-memory "
        "blast --ledger ledger.jsonl --receipts receipts/ --fact <factId>",
    )
    p.add_argument("--ledger", help="the ledger (path or URL); never created")
    add_forget_mode_flags(p)
    p.add_argument("--receipts", metavar="DIR", help="the receipts directory the gateway writes")
    p.add_argument("--fact", metavar="FACT_ID", help="the fact whose blast radius to walk")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument(
        "--retract",
        action="store_true",
        help="also plan the retraction of every derived belief still believed (a dry run "
        "unless --apply)",
    )
    p.add_argument("--apply", action="store_true", help="with --retract: do it")
    p.add_argument("--reason", help="with --retract --apply: why (recorded on every retraction)")
    p.add_argument(
        "--actor",
        default="agent-custody-memory",
        help="with --retract: who retracts (default agent-custody-memory)",
    )
    p.add_argument(
        "--receipt-id",
        metavar="ID",
        help="with --retract: the receipt recorded as the source of every retraction",
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        help="with --retract --apply: memory.toml whose stores are cleaned too",
    )
    p.set_defaults(func=_run("cmd_blast"))

    p = _parser(
        sub,
        "explain",
        "one receipt answered as ten questions; a signed action pack (--out --sign), --verify",
        "Who acted, who authorized it, what was allowed, what the agent saw, what it did, why, "
        "the evidence, whether it verifies, what depended on it, what needs reversal. Example: "
        "agent-custody-memory explain --receipts receipts/ --receipt <id> --ledger ledger.jsonl "
        "--issuer-key gateway.pub --principal-key principal.pub",
    )
    p.add_argument("--receipts", metavar="DIR", help="the receipts directory")
    p.add_argument("--receipt", metavar="ID", help="the receipt id to explain")
    p.add_argument("--ledger", help="the ledger: answers what depended on the call")
    add_forget_mode_flags(p)
    _receipt_keys(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of the answers")
    p.add_argument("--out", metavar="FILE", help="write the signed action pack here (needs --sign)")
    p.add_argument("--sign", metavar="KEY", help="the private key (PKCS8 PEM) signing the pack")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    p.add_argument("--verify", metavar="FILE", help="check a signed action pack (needs --key)")
    p.add_argument("--key", action="append", metavar="PUB", help="the pack signer's " + KEY_HELP)
    p.set_defaults(func=_run("cmd_explain"))

    p = _parser(
        sub,
        "pack",
        "the signed custody pack of one fact (history, receipts, blast radius, forget), --verify",
        "Everything about one fact as one signed file a reviewer checks with public keys alone. "
        "Example: agent-custody-memory pack --ledger ledger.jsonl --receipts receipts/ --fact "
        "<factId> --out fact.pack.json --sign pack.key",
    )
    p.add_argument("--ledger", help="the ledger (path or URL); never created")
    add_forget_mode_flags(p)
    p.add_argument("--receipts", metavar="DIR", help="the receipts directory")
    p.add_argument("--fact", metavar="FACT_ID", help="the fact to pack")
    p.add_argument("--out", metavar="FILE", help="where the signed pack is written")
    p.add_argument("--sign", metavar="KEY", help="the private key (PKCS8 PEM) signing the pack")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    p.add_argument("--verify", metavar="FILE", help="check a signed custody pack (needs --key)")
    p.add_argument("--key", action="append", metavar="PUB", help="the pack signer's " + KEY_HELP)
    _receipt_keys(p, log=False)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_run("cmd_pack"))

    p = _parser(
        sub,
        "review",
        "the receipts as local read-only web pages, served on loopback or written (--out)",
        "An index of every receipt and one page per receipt with the ten answers and the "
        "verification report. Served on 127.0.0.1 until Ctrl-C, or written as static files with "
        "--out. Example: agent-custody-memory review --receipts receipts/ --ledger ledger.jsonl "
        "--issuer-key gateway.pub --principal-key principal.pub",
    )
    p.add_argument("--receipts", metavar="DIR", help="the receipts directory")
    p.add_argument("--ledger", help="the ledger: answers what depended on each call")
    add_forget_mode_flags(p)
    _receipt_keys(p)
    p.add_argument("--log-id", metavar="ID", help="the log every tree head must name")
    p.add_argument("--port", type=int, default=8791, help="port (default 8791; 0 picks one)")
    p.add_argument("--host", default="127.0.0.1", help="a loopback address (default 127.0.0.1)")
    p.add_argument("--title", help='the pages\' heading (default "Receipts")')
    p.add_argument("--out", metavar="DIR", help="write static pages into DIR instead of serving")
    p.set_defaults(func=_run("cmd_review"))

    p = _parser(
        sub,
        "eval",
        "score the ledger (and a naive store) on memory-mutation scenarios; signed reports",
        "Runs the built-in scenarios (or --scenarios FILE) on a fresh ledger; exit 1 if the "
        "ledger regressed. Example: agent-custody-memory eval --baseline --sign eval.key --out "
        "report.json; then agent-custody-memory eval --verify report.json --key eval.key.pub",
    )
    p.add_argument("--scenarios", metavar="FILE", help='a scenario file ({"version": "0.1", ...})')
    p.add_argument("--baseline", action="store_true", help="also score a naive overwrite store")
    p.add_argument("--json", action="store_true", help="print the reports as JSON")
    p.add_argument("--sign", metavar="KEY", help="sign the ledger's report (needs --out)")
    p.add_argument("--out", metavar="FILE", help="where the signed report is written")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    p.add_argument("--verify", metavar="FILE", help="check a signed report (needs --key)")
    p.add_argument("--key", action="append", metavar="PUB", help="the report signer's " + KEY_HELP)
    p.set_defaults(func=_run("cmd_eval"))

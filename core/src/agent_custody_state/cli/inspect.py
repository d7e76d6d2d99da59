"""Looking inside a ledger: ``facts``, ``history``, ``timeline``, ``show`` (read only).

Each opens an existing ledger (any backend: JSONL, SQLite, PostgreSQL, a plugin's), asks the
ledger one read and prints it: a table for people, or with ``--json`` the wire JSON the memory
tools answer (``facts``: memory.read's ``{"facts": [...]}``; ``history``: memory.history's
``{"events": [...]}``; ``show``: memory.get's fact). Nothing is written and no ledger is created.
A ledger written in crypto-shred mode is read in that mode, with the key store it records
(``common.open_recorded``), unless ``--forget-mode``/``--key-store`` say otherwise.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from agent_custody_state.cli.common import (
    TIME_FORMAT,
    CliError,
    add_forget_mode_flags,
    add_json_argument,
    add_ledger_argument,
    open_ledger,
    time_option,
)
from agent_custody_state.ledger.chain import public_event, public_fact

#: Rows a ``facts`` table shows unless ``--limit`` says otherwise (``--json`` has no default
#: limit): a table of a million rows helps nobody, and drawing it takes minutes.
TABLE_LIMIT = 100


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if number < 0:
        raise argparse.ArgumentTypeError("must be 0 (no limit) or more")
    return number


# -- facts ----------------------------------------------------------------------------------------


def cmd_facts(args: argparse.Namespace) -> int:
    valid_at = time_option(args.valid_at, "--valid-at")
    tx_at = time_option(args.tx_at, "--tx-at")
    with open_ledger(args) as ledger:
        facts = ledger.as_of(
            valid_at=valid_at,
            tx_at=tx_at,
            space=args.space,
            subject=args.subject,
            predicate=args.predicate,
            include=args.include,
        )
        now = ledger.now()
    limit = args.limit if args.limit is not None else (0 if args.json else TABLE_LIMIT)
    shown = facts[:limit] if limit else facts
    if args.json:
        from agent_custody_state.cli.render import print_json

        print_json({"facts": [public_fact(f.to_dict()) for f in shown]})
        return 0
    from agent_custody_state.cli.render import print_table

    title = (
        f"{len(facts)} fact{'s' if len(facts) != 1 else ''} believed valid at "
        f"{valid_at or now}, as known at {tx_at or now} ({args.include})"
    )
    if not facts:
        print(title)
        return 0
    caption = (
        f"showing {len(shown)} of {len(facts)}; --limit 0 shows all"
        if len(shown) < len(facts)
        else None
    )
    print_table(
        ("fact", "subject", "predicate", "value", "space", "provenance", "valid from", "valid to"),
        (
            (
                f.fact_id,
                f.subject,
                f.predicate,
                _value(f),
                f.space,
                f.provenance,
                f.valid_from,
                f.valid_to or "-",
            )
            for f in shown
        ),
        title=title,
        caption=caption,
        no_wrap=("fact", "valid from", "valid to"),
    )
    return 0


def _value(fact: Any) -> str:
    from agent_custody_state.cli.render import value_text

    if fact.forgotten is not None:
        return f"(forgotten {fact.forgotten.at})"
    return value_text(fact.value)


# -- history --------------------------------------------------------------------------------------


def _detail(event: Any, fact_id: str) -> str:
    """What an event says, in a few words (never more of a value than the table shows)."""
    kind = event.kind
    if kind == "assert":
        text = f"{event.fact.predicate} = {_value(event.fact)}"
        if event.supersedes is not None and event.fact_id != fact_id:
            # The id's head is enough here: the superseded fact has its own row.
            return f"supersedes {event.supersedes[:8]}…: {text}"
        return text
    if kind == "forget":
        return f"{event.reason} (digest: {event.digest_kind})"
    return getattr(event, "reason", "") or ""


def _receipt(event: Any) -> str:
    source = event.fact.source if event.kind == "assert" else event.source
    return source.receipt_id or "-"


def _actor(event: Any) -> str:
    return str(event.fact.actor if event.kind == "assert" else event.actor)


def cmd_history(args: argparse.Namespace) -> int:
    with open_ledger(args) as ledger:
        events = ledger.history(args.fact)
    if not events:
        raise CliError(f"unknown fact {args.fact} in {ledger.location}")
    if args.json:
        from agent_custody_state.cli.render import print_json

        print_json({"events": [public_event(e) for e in events]})
        return 0
    from agent_custody_state.cli.render import print_table

    print_table(
        ("learned (tx time)", "event", "fact", "actor", "receipt", "detail"),
        (
            (
                e.tx_time,
                e.kind,
                "this fact" if e.fact_id == args.fact else e.fact_id,
                _actor(e),
                _receipt(e),
                _detail(e, args.fact),
            )
            for e in events
        ),
        title=f"history of fact {args.fact}: {len(events)} events, oldest first",
        no_wrap=("learned (tx time)", "fact"),
    )
    return 0


# -- timeline -------------------------------------------------------------------------------------


def cmd_timeline(args: argparse.Namespace) -> int:
    tx_at = time_option(args.tx_at, "--tx-at")
    with open_ledger(args) as ledger:
        found = ledger.timeline(
            args.subject, predicate=args.predicate, space=args.space, tx_at=tx_at
        )
    if args.json:
        from agent_custody_state.cli.render import print_json

        print_json(
            {
                "subject": found.subject,
                "txAt": tx_at,
                "facts": [public_fact(f.to_dict()) for f in found.facts],
                "states": found.states,
                "held": found.held,
                "events": [public_event(e) for e in found.events],
            }
        )
        return 0
    if not found.facts:
        print(f"no facts about {args.subject} in {ledger.location}", file=sys.stderr)
        return 0
    from agent_custody_state.cli.render import print_table

    facts = {f.fact_id: f for f in found.facts}
    known = f", as known at {tx_at}" if tx_at else ""
    print_table(
        ("fact", "predicate", "value", "valid from", "valid to", "now"),
        (
            (
                f.fact_id,
                f.predicate,
                _value(f),
                f.valid_from,
                f.valid_to or "-",
                found.states[f.fact_id] + (", held" if f.fact_id in found.held else ""),
            )
            for f in sorted(found.facts, key=lambda f: (f.predicate, f.valid_from))
        ),
        title=f"what was believed about {args.subject} (valid time){known}",
        no_wrap=("valid from", "valid to", "fact"),
    )
    print_table(
        ("learned (tx time)", "event", "predicate", "fact", "actor", "detail"),
        (
            (
                e.tx_time,
                e.kind,
                facts[e.fact_id].predicate if e.fact_id in facts else "-",
                e.fact_id,
                _actor(e),
                _detail(e, ""),
            )
            for e in found.events
        ),
        title=f"when it was learned (transaction time){known}",
        no_wrap=("learned (tx time)", "fact"),
    )
    return 0


# -- show -----------------------------------------------------------------------------------------


def cmd_show(args: argparse.Namespace) -> int:
    with open_ledger(args) as ledger:
        fact = ledger.get(args.fact)
        if fact is None:
            raise CliError(f"unknown fact {args.fact} in {ledger.location}")
        status = ledger.status(args.fact)
        external = ledger.current_external(args.fact)
    assert status is not None
    state, held = status
    if args.json:
        from agent_custody_state.cli.render import print_json
        from agent_custody_state.server.shapes import policy_shape

        print_json(policy_shape(fact, state in ("retracted", "forgotten")))
        return 0
    import json

    from agent_custody_state.cli.render import print_fields

    rows = [
        ("fact", fact.fact_id),
        ("subject", fact.subject),
        ("predicate", fact.predicate),
        ("value", _value(fact) if fact.forgotten else json.dumps(fact.value, ensure_ascii=False)),
        ("space", fact.space),
        ("now", state + (", on legal hold" if held else "")),
        ("provenance", fact.provenance),
        ("actor", fact.actor),
        ("receipt", fact.receipt_id or "-"),
        ("valid from", fact.valid_from),
        ("valid to", fact.valid_to or "-"),
        ("confidence", "-" if fact.confidence is None else str(fact.confidence)),
        ("store ids", ", ".join(f"{k}: {v}" for k, v in external.items()) or "-"),
    ]
    if fact.forgotten is not None:
        f = fact.forgotten
        rows.append(("forgotten", f"at {f.at}, digest {f.digest_kind} {f.value_digest or ''}"))
    print_fields(rows, title=f"fact {fact.fact_id}")
    return 0


# -- parser ---------------------------------------------------------------------------------------


def add_commands(sub: Any) -> None:
    """Add ``facts``, ``history``, ``timeline`` and ``show`` to the parser."""
    p = sub.add_parser(
        "facts",
        help="the as-of table: what was believed, valid when, as known when",
        description="What the ledger believed valid at --valid-at, as it knew it at --tx-at "
        "(both default to now): memory.read from a terminal. Read only.",
        epilog="example: agent-custody-memory facts --ledger memory.sqlite --subject user:42 "
        "--tx-at 2026-01-01T00:00:00Z",
    )
    add_ledger_argument(p)
    add_forget_mode_flags(p)
    p.add_argument("--subject", help="only facts about this subject, e.g. user:42")
    p.add_argument("--predicate", help="only this predicate, e.g. plan")
    p.add_argument("--space", help="only this space, e.g. org or team:support")
    p.add_argument(
        "--valid-at",
        metavar="TIME",
        help=f"believed valid at this instant (world time); {TIME_FORMAT}",
    )
    p.add_argument(
        "--tx-at", metavar="TIME", help=f"as the ledger knew it at this instant; {TIME_FORMAT}"
    )
    p.add_argument(
        "--include",
        choices=("all", "attested", "verified"),
        default="all",
        help="all (default, claimed facts too), attested (memory.read's default) or verified",
    )
    p.add_argument(
        "--limit",
        type=_positive,
        metavar="N",
        help=f"at most N facts (default {TABLE_LIMIT} in a table, all with --json; 0: all)",
    )
    add_json_argument(p, 'memory.read\'s {"facts": [...]}')
    p.set_defaults(func=cmd_facts)

    p = sub.add_parser(
        "history",
        help="every event of one fact, and what superseded it",
        epilog="example: agent-custody-memory history 0b9c...-fact-id --ledger memory.sqlite",
    )
    p.add_argument("fact", metavar="FACT", help="the fact id")
    add_ledger_argument(p)
    add_forget_mode_flags(p)
    add_json_argument(p, 'memory.history\'s {"events": [...]}')
    p.set_defaults(func=cmd_history)

    p = sub.add_parser(
        "timeline",
        help="one subject on both time axes: what was believed, and when it was learned",
        description="Every fact about SUBJECT with its validity (what was believed, valid "
        "when) and every event about them in the order the ledger learned them.",
        epilog="example: agent-custody-memory timeline user:42 --ledger memory.sqlite",
    )
    p.add_argument("subject", metavar="SUBJECT", help="the subject, e.g. user:42")
    add_ledger_argument(p)
    add_forget_mode_flags(p)
    p.add_argument("--predicate", help="only this predicate")
    p.add_argument("--space", help="only this space")
    p.add_argument(
        "--tx-at", metavar="TIME", help=f"as the ledger knew it at this instant; {TIME_FORMAT}"
    )
    add_json_argument(p, "the timeline (facts, states, held, events)")
    p.set_defaults(func=cmd_timeline)

    p = sub.add_parser(
        "show",
        help="one fact: its fields, status now and where the stores hold it",
        epilog="example: agent-custody-memory show 0b9c...-fact-id --ledger memory.sqlite",
    )
    p.add_argument("fact", metavar="FACT", help="the fact id")
    add_ledger_argument(p)
    add_forget_mode_flags(p)
    add_json_argument(p, "memory.get's fact")
    p.set_defaults(func=cmd_show)

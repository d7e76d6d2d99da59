"""``forget``, ``certificate verify`` and ``certificate reapply``: erase one fact, with a signed
erasure certificate, check one (``docs/proofs.md``, "Certificates"), and forget again after a
restore from backup what a folder of them certifies (``reapply``).

``forget`` runs the flow memory.forget runs (``Custody.forget``): with ``--config`` the ledger,
forget key, stores and signing key come from the server's configuration file; like ``sweep``,
it keeps the store removals it owes in the outbox and first finishes those a crash left.
``--certificate FILE`` writes the certificate; every check (the key, the file) comes before the
forget, so a refused command changes nothing. ``certificate verify`` exits 0 with ``ok: ...`` or 1 with
``FAILED: FILE: <the first reason>``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from agent_custody_state.cli.certfile import configured_archive, public_keys
from agent_custody_state.cli.common import (
    LEDGER_HELP,
    RECORDED,
    CliError,
    add_forget_mode_flags,
    add_json_argument,
    certificate_key,
    check_location,
    check_output,
    without_password,
    write_certificate,
)
from agent_custody_state.controltext import shown


def cmd_forget(args: argparse.Namespace) -> int:
    import anyio

    from agent_custody_state.cli.sweep import (
        _forget_key,
        _forget_mode,
        _load,
        _outbox,
        _stores,
        open_mode,
    )
    from agent_custody_state.stores.flows import Custody

    config, location = _load(args)
    check_location(location, must_exist=True)
    key = certificate_key(args, config)
    out = check_output(args.certificate, "--certificate") if args.certificate else None
    if out is not None and key is None:
        raise CliError("--certificate needs --key K (or key = ... in the --config file)")
    archive = configured_archive(config, key)  # kept there too, as the server keeps them
    forget_key = _forget_key(args, config)
    stores, verify = _stores(config)
    outbox = _outbox(location, config)
    with open_mode(location, _forget_mode(args, config), forget_key=forget_key) as ledger:
        # The store removals owed, in the outbox first, as sweep and the server keep them: a
        # crash between the ledger's commit and the removal left the erased value in a store
        # with no record; and the removals a crash left are finished first.
        custody = Custody(
            ledger,
            stores,
            verify=verify,
            certificate_key=key,
            outbox=outbox,
            certificates=archive,
        )
        resumed = anyio.run(custody.resume)
        if resumed is not None and resumed.summary():
            import sys

            print(f"agent-custody-memory: {resumed.summary()}", file=sys.stderr)
        done = anyio.run(
            lambda: custody.forget(
                fact_id=args.fact,
                actor=args.actor,
                reason=args.reason,
                keep_digest=not args.no_digest,
                certificate=out is not None,
            )
        )
    if out is not None and done.certificate is not None:
        write_certificate(out, done.certificate)
    if args.json:
        from agent_custody_state.cli.render import print_json
        from agent_custody_state.server.shapes import forget_shape

        print_json(forget_shape(done))
    else:
        line = f"forgot {done.event.fact_id} ({done.event.digest_kind} digest kept)"
        if done.removal.removed_from:
            line += f"; removed from {', '.join(done.removal.removed_from)}"
        if out is not None:
            line += f"; certificate in {out}"
        print(shown(line))  # one line, whatever the certificate's path holds
    if done.removal.still_held:
        from agent_custody_state.server.shapes import still_held_text

        raise CliError(f"erased from the ledger, but still held by {still_held_text(done.removal)}")
    return 0


def cmd_verify_certificate(args: argparse.Namespace) -> int:
    from agent_custody_state.ledger.certverify import (
        CertificateError,
        check_against,
        check_certificate,
        read_json,
        signer,
    )

    keys = public_keys(args.key)
    if args.ledger:
        check_location(args.ledger, must_exist=True)
        _check_jsonl_ledger(args.ledger)
    if not Path(args.file).is_file():
        from agent_custody_state.cli.inputs import not_a_file

        hint = (
            "; for a folder: certificate reapply DIR --dry-run" if Path(args.file).is_dir() else ""
        )
        raise CliError(f"{args.file}: {not_a_file(args.file, 'certificate file')}{hint}")
    try:
        # Strict: a key twice (a second ``payload`` a first-wins reader does not see) fails.
        envelope = read_json(Path(args.file).read_bytes())
    except CertificateError as exc:
        print(f"FAILED: {args.file}: {exc}")
        return 1
    except ValueError as exc:
        raise CliError(f"{args.file}: not JSON ({exc})") from None
    try:
        refs = [ref for _, ref in keys.values()]
        statement = check_certificate(envelope, refs)
        if args.ledger:
            from agent_custody_state.cli.proofs import stored

            with stored(args.ledger) as (lines, _notes):
                check_against(statement, lines)
    except CertificateError as exc:
        print(shown(f"FAILED: {args.file}: {exc}{_key_hint(str(exc), list(keys.values()))}"))
        return 1
    predicate = statement["predicate"]
    fact = statement["subject"][0]["name"]
    ledger = without_password(args.ledger) if args.ledger else None
    where = f"; in {ledger}: chain verifies, fact forgotten" if ledger else ""
    print(
        shown(
            f"ok: {args.file}: fact {fact} erased ({predicate['sanitization']['category']}), "
            f"outcome {predicate['outcome']}, signed by {signer(envelope, refs)[:16]}{where}"
        )
    )
    return 0


def _check_jsonl_ledger(location: str) -> None:
    from agent_custody_state.cli.proofs import _is_jsonl, check_jsonl_ledger

    if _is_jsonl(location):
        check_jsonl_ledger(location)


def _key_hint(reason: str, keys: list[tuple[str, Any]]) -> str:
    """After a signature by another key: which keys were given, and what to pass instead."""
    if not reason.startswith("signature: no trusted key matches"):
        return ""
    given = "; ".join(f"--key {name} is key {ref.keyid[:12]}" for name, ref in keys)
    return (
        f" ({given}); pass the public key of the key that signed it "
        "(the forget's --key, or the config's key, with .pub)"
    )


def add_commands(sub: Any) -> None:
    """Add ``forget`` and ``certificate`` to the parser."""
    p = sub.add_parser(
        "forget",
        help="erase one fact's value (ledger and stores), optionally with a signed certificate",
        description="Forget (erase the value of) one fact, as memory.forget does: the ledger "
        "first, then every configured store, verified. --certificate FILE writes a signed "
        "erasure certificate (docs/proofs.md). Exit 1 if a store could not remove the fact.",
    )
    p.add_argument("--ledger", metavar="LOCATION", help=LEDGER_HELP + "; default: the config's")
    p.add_argument(
        "--config", metavar="FILE", help="the server's TOML config (ledger, stores, key)"
    )
    p.add_argument("--fact", required=True, metavar="ID", help="the fact's id")
    p.add_argument("--reason", required=True, help="recorded on the forget event")
    p.add_argument("--actor", default="agent-custody-memory", help="recorded on the forget event")
    p.add_argument("--no-digest", action="store_true", help="keep no digest (digestKind none)")
    p.add_argument("--forget-key-env", metavar="NAME", help="variable holding the forget key")
    p.add_argument("--certificate", metavar="FILE", help="write the signed certificate here")
    p.add_argument("--key", metavar="K", help="Ed25519 private key that signs it (PKCS8 PEM)")
    add_json_argument(p, "memory.forget's JSON")
    add_forget_mode_flags(p, default=f"the --config file's forget_mode, else {RECORDED}")
    p.set_defaults(func=cmd_forget)

    p = sub.add_parser(
        "certificate", help="check an erasure certificate, or re-apply a folder of them"
    )
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB", help="verify, reapply")
    v = verbs.add_parser(
        "verify",
        help="check a certificate's signature and shape, and with --ledger its ledger",
        description="Exit 0 and print ok: ..., or exit 1 and print FAILED: FILE: <first reason>.",
    )
    v.add_argument("file", metavar="FILE", help="the certificate (a DSSE envelope, JSON)")
    v.add_argument(
        "--key",
        required=True,
        action="append",
        metavar="PUB",
        help="the signer's public key (repeatable: the keys before and after a rotation)",
    )
    v.add_argument("--ledger", metavar="LOCATION", help="also check it against this ledger")
    v.set_defaults(func=cmd_verify_certificate)
    from agent_custody_state.cli.reapply import add_reapply

    add_reapply(verbs, "a signer's public key (repeatable: the keys before and after a rotation)")

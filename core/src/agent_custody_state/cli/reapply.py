"""``certificate reapply DIR``: forget again, after a restore from backup, what the erasure
certificates kept in DIR certify (docs/forget.md, "After a restore from backup").

A ledger restored from a backup taken before some forgets holds those values again. Every
``*.json`` in DIR is read strictly and its signature checked with the given public keys (as
``certificate verify`` does, without ``--ledger``'s chain checks: the restored ledger is an
earlier state); one that does not verify is reported and never acted on. Each certified fact the
ledger still holds with its value is forgotten as ``forget`` does (ledger first, then the
``--config`` stores, with the outbox), keeping a digest as the certified forget did. A fact on
legal hold is kept and reported: a hold is the operator's decision. Every check comes before the
first forget, so a refused command changes nothing; ``--dry-run`` opens the ledger read-only.
In crypto-shred mode it then destroys again every data key the key store holds of a fact the
ledger records forgotten (a key store restored from before the forget: ``ShreddingBackend.
destroy_restored_keys``), certificate or not: the ledger's own record is the authority.
Exit 0 when every verified certificate's fact is forgotten (now or before), else 1.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from agent_custody_state.cli.common import CliError, check_location

ACTOR = "agent-custody-memory"
REASON = "erasure re-applied after a restore (certificate {name})"
NO_KEY = (
    "its data key was already destroyed (the key store is newer than the ledger): the value "
    "could not be read, so no digest was kept"
)


@dataclass
class Certified:
    """One verified certificate: its file, the fact, the ledger and the digest it names."""

    name: str
    fact_id: str
    ledger_id: str
    digest_kind: str
    digest: dict[str, Any]  # the subject's digest set


@dataclass
class Plan:
    """What the certificates in DIR ask of this ledger, before anything changes."""

    refused: list[tuple[str, str]] = field(default_factory=list)  # (file, first reason)
    forget: list[Certified] = field(default_factory=list)
    already: list[Certified] = field(default_factory=list)
    unknown: list[Certified] = field(default_factory=list)
    held: list[Certified] = field(default_factory=list)
    other_ledger: list[Certified] = field(default_factory=list)
    duplicates: list[Certified] = field(default_factory=list)  # a second certificate of a fact


def read_folder(folder: Path, keys: list[Any]) -> tuple[list[Certified], list[tuple[str, str]]]:
    """Every ``*.json`` in ``folder``, in name order: the verified ones and the refused ones."""
    from agent_custody_state.ledger.certverify import CertificateError, check_certificate, read_json

    good: list[Certified] = []
    refused: list[tuple[str, str]] = []
    for path in sorted(folder.glob("*.json")):
        if not path.is_file():
            continue
        try:
            statement = check_certificate(read_json(path.read_bytes()), keys)
            good.append(_certified(path.name, statement))
        except (CertificateError, ValueError, KeyError, TypeError) as exc:
            refused.append((path.name, str(exc) or type(exc).__name__))
        except OSError as exc:
            refused.append((path.name, exc.strerror or str(exc)))
    return good, refused


def _certified(name: str, statement: dict[str, Any]) -> Certified:
    predicate = statement["predicate"]
    subject = statement["subject"][0]
    fact = predicate.get("fact")
    kind = fact.get("digestKind") if isinstance(fact, dict) else None
    if not isinstance(kind, str):  # the subject says it too: a commitment when none was kept
        kind = "none" if "valueCommitment" in subject["digest"] else next(iter(subject["digest"]))
    ledger_id = str(predicate["media"].get("ledgerId"))
    return Certified(name, subject["name"], ledger_id, kind, dict(subject["digest"]))


def plan(ledger: Any, certified: list[Certified], refused: list[tuple[str, str]]) -> Plan:
    """Sort the verified certificates by what the ledger holds now (``ledger`` open)."""
    from agent_custody_state.ledger.checkpoints import ledger_origin
    from agent_custody_state.ledger.queries import fact_states

    out = Plan(refused=list(refused))
    origin = ledger_origin(ledger.backend)
    seen: set[str] = set()
    states = fact_states(ledger.backend, [c.fact_id for c in certified])
    for cert in certified:
        if cert.fact_id in seen:
            out.duplicates.append(cert)
            continue
        seen.add(cert.fact_id)
        state = states.get(cert.fact_id)
        if state is None:
            # An empty ledger (a backup from before the first event) has no origin yet.
            mine = origin.endswith("/-") or cert.ledger_id == origin
            (out.unknown if mine else out.other_ledger).append(cert)
        elif cert.ledger_id != origin:
            out.other_ledger.append(cert)
        elif state.forgotten:
            out.already.append(cert)
        elif state.held:
            out.held.append(cert)
        else:
            out.forget.append(cert)
    return out


def cmd_reapply(args: argparse.Namespace) -> int:
    from agent_custody_state.cli.certfile import load_public_keys
    from agent_custody_state.cli.sweep import _forget_key, _forget_mode, _load, open_mode

    keys = load_public_keys(args.key)
    folder = Path(args.dir)
    if not folder.is_dir():
        from agent_custody_state.cli.inputs import not_a_file

        hint = (
            "; pass its folder, or check it alone: certificate verify FILE"
            if folder.is_file()
            else ""
        )
        raise CliError(f"{args.dir}: {not_a_file(args.dir, 'folder of certificates')}{hint}")
    config, location = _load(args)
    check_location(location, must_exist=True)
    certified, refused = read_folder(folder, keys)
    mode = _forget_mode(args, config)
    forget_key = _forget_key(args, config)
    if args.dry_run:
        with open_mode(location, mode, reads_only=True) as ledger:  # changes nothing
            found = plan(ledger, certified, refused)
            # The real run's refusal, before it: a dry run that passed promised a run that
            # would then refuse for want of the forget key (or with another one).
            _check_hmac(ledger, found.forget, forget_key)
            back = _restored_keys(ledger, dry_run=True)
        return report(found, [], dry_run=True, as_json=args.json, keys=back)
    with open_mode(location, mode, forget_key=forget_key) as ledger:
        found = plan(ledger, certified, refused)
        _check_hmac(ledger, found.forget, forget_key)
        done = _forget_all(args, config, location, ledger, found.forget)
        back = _restored_keys(ledger, dry_run=False)
    return report(found, done, dry_run=False, as_json=args.json, keys=back)


def _restored_keys(ledger: Any, *, dry_run: bool) -> dict[str, list[str]]:
    """Crypto-shred: the data keys of facts the ledger records forgotten that the key store holds
    again (restored from before their forgets), destroyed unless ``dry_run``; by fact id."""
    destroy = getattr(ledger.backend, "destroy_restored_keys", None)
    return {} if destroy is None else dict(destroy(dry_run=dry_run))


def _check_hmac(ledger: Any, todo: list[Certified], forget_key: str | None) -> None:
    """Refuse, before any forget, to re-apply an HMAC digest without the forget key that made
    it (a plain SHA-256 of a guessable value can be reversed by guessing), or with another."""
    from agent_custody_state.canonical import value_digest

    missing, wrong = [], []
    for cert in todo:
        if not cert.digest_kind.startswith("hmac"):
            continue
        if not forget_key:
            missing.append(cert.name)
            continue
        fact = ledger.get(cert.fact_id)
        if fact is None or fact.value is None:
            continue  # unreadable (crypto-shred, key gone): forgotten without a digest
        digest, kind = value_digest(fact.value, forget_key=forget_key)
        if cert.digest.get(kind) != digest:
            wrong.append(cert.name)
    if missing:
        raise CliError(
            f"{', '.join(missing)} kept an HMAC digest (the forget key's): give the forget key "
            "(--forget-key-env NAME, or forget_key_env in the --config file) so the erasure "
            "is re-applied with the same kind of digest; nothing was forgotten"
        )
    if wrong:
        raise CliError(
            f"{', '.join(wrong)}: the forget key given is not the one that made the certified "
            "HMAC digest (a rotated key?); give that key; nothing was forgotten"
        )


def _forget_all(
    args: argparse.Namespace, config: Any, location: str, ledger: Any, todo: list[Certified]
) -> list[dict[str, Any]]:
    """Forget each fact as ``forget`` does (``Custody.forget``, the stores, the outbox)."""
    import sys

    import anyio

    from agent_custody_state.cli.sweep import _outbox, _stores
    from agent_custody_state.ledger.errors import LedgerError
    from agent_custody_state.stores.flows import Custody

    if not todo:
        return []
    stores, verify = _stores(config)
    custody = Custody(ledger, stores, verify=verify, outbox=_outbox(location, config))
    resumed = anyio.run(custody.resume)
    if resumed is not None and resumed.summary():
        print(f"agent-custody-memory: {resumed.summary()}", file=sys.stderr)
    done: list[dict[str, Any]] = []
    for cert in todo:
        entry: dict[str, Any] = {"factId": cert.fact_id, "certificate": cert.name}
        try:
            try:
                removal = anyio.run(partial(_forget_one, custody, cert, cert.digest_kind != "none"))
            except LedgerError as exc:
                if getattr(exc, "code", None) != "key_missing":
                    raise
                # Crypto-shred, the key store newer than the ledger: the forget destroyed the
                # data key, the value is unreadable, no digest can be computed. Record the
                # erasure all the same, so the ledger says what is true.
                removal = anyio.run(partial(_forget_one, custody, cert, False))
                entry["note"] = NO_KEY
        except LedgerError as exc:  # e.g. put on hold meanwhile: reported, the rest go on
            entry["error"] = str(exc)
            done.append(entry)
            continue
        entry["digestKind"] = removal.event.digest_kind
        entry["removedFrom"] = list(removal.removal.removed_from)
        if removal.removal.still_held:
            from agent_custody_state.server.shapes import still_held_text

            entry["stillHeld"] = still_held_text(removal.removal)  # the ledger's part is done
        done.append(entry)
    return done


async def _forget_one(custody: Any, cert: Certified, keep_digest: bool) -> Any:
    return await custody.forget(
        fact_id=cert.fact_id,
        actor=ACTOR,
        reason=REASON.format(name=cert.name),
        keep_digest=keep_digest,
    )


def _facts(certs: list[Certified]) -> list[dict[str, str]]:
    return [{"factId": c.fact_id, "certificate": c.name} for c in certs]


def report(
    found: Plan,
    done: list[dict[str, Any]],
    *,
    dry_run: bool,
    as_json: bool,
    keys: dict[str, list[str]] | None = None,
) -> int:
    """Print what was (or would be) done; 0 when every verified certificate's fact is gone.
    ``keys``: the data keys of forgotten facts destroyed again (or that would be), by fact."""
    keys = keys or {}
    failed = [d for d in done if "error" in d]
    held_by_stores = [d for d in done if "stillHeld" in d]
    ok = not (found.refused or found.held or found.other_ledger or failed or held_by_stores)
    if as_json:
        from agent_custody_state.cli.render import print_json

        print_json(
            {
                "dryRun": dry_run,
                "ok": ok,
                ("wouldForget" if dry_run else "forgotten"): (
                    _facts(found.forget) if dry_run else [d for d in done if "error" not in d]
                ),
                "failed": failed,
                "alreadyForgotten": _facts(found.already),
                "notInLedger": _facts(found.unknown),
                "onHold": _facts(found.held),
                "otherLedger": _facts(found.other_ledger),
                "duplicates": _facts(found.duplicates),
                "refused": [{"certificate": n, "reason": r} for n, r in found.refused],
                ("wouldDestroyKeys" if dry_run else "keysDestroyed"): [
                    {"factId": f, "keyIds": k} for f, k in keys.items()
                ],
            }
        )
        return 0 if ok else 1
    for name, reason in found.refused:
        print(f"FAILED: {name}: {reason}; not acted on")
    if dry_run:
        for cert in found.forget:
            print(f"would forget {cert.fact_id}  (certificate {cert.name})")
    for entry in done:
        if "error" in entry:
            print(f"not forgotten {entry['factId']}: {entry['error']}")
            continue
        line = f"forgot {entry['factId']} ({entry['digestKind']} digest kept)"
        if entry["removedFrom"]:
            line += f"; removed from {', '.join(entry['removedFrom'])}"
        if "note" in entry:
            line += f"; {entry['note']}"
        if "stillHeld" in entry:
            line += f"; but still held by {entry['stillHeld']}"
        print(f"{line}  (certificate {entry['certificate']})")
    for fact_id, kids in keys.items():
        print(
            f"{'would destroy' if dry_run else 'destroyed'} again the data key {', '.join(kids)} "
            f"of {fact_id}: forgotten in this ledger, back with a restored key store"
        )
    for cert in found.held:
        print(f"kept {cert.fact_id}: on legal hold  (certificate {cert.name})")
    for cert in found.other_ledger:
        print(f"skipped {cert.fact_id}: the certificate is of another ledger ({cert.ledger_id})")
    gone = len(found.forget) if dry_run else len(done) - len(failed)
    verb = "would forget" if dry_run else "forgot"
    parts = [
        f"{verb} {gone}",
        f"{len(found.already)} already forgotten",
        f"{len(found.unknown)} not in this ledger",
        f"{len(found.held)} on legal hold, kept",
    ]
    if failed:
        parts.append(f"{len(failed)} failed")
    if held_by_stores:
        parts.append(f"{len(held_by_stores)} still held by a store")
    if found.other_ledger:
        parts.append(f"{len(found.other_ledger)} of another ledger")
    if found.duplicates:
        parts.append(f"{len(found.duplicates)} second certificates of a fact")
    if keys:
        done_keys = "would be destroyed" if dry_run else "destroyed"
        parts.append(f"data keys of {len(keys)} forgotten fact(s) {done_keys} again")
    parts.append(f"{len(found.refused)} certificates refused")
    print(f"{'dry run: ' if dry_run else ''}reapply: {'; '.join(parts)}")
    return 0 if ok else 1


def add_reapply(verbs: Any, key_help: str) -> None:
    """Add ``certificate reapply`` to the ``certificate`` command's verbs."""
    from agent_custody_state.cli.common import (
        LEDGER_HELP,
        RECORDED,
        add_forget_mode_flags,
        add_json_argument,
    )

    r = verbs.add_parser(
        "reapply",
        help="after a restore from backup, forget again what the certificates in DIR certify",
        description="Read every *.json erasure certificate in DIR, verify its signature, and "
        "forget again (ledger, then the --config stores) each certified fact the ledger holds "
        "with its value, as forget does. A certificate that does not verify is not acted on; a "
        "fact on legal hold is kept. Exit 0 when every verified certificate's fact is forgotten "
        "(now or before), else 1 (docs/forget.md, 'After a restore from backup').",
    )
    r.add_argument("dir", metavar="DIR", help="the certificates folder (certificates = DIR)")
    r.add_argument("--ledger", metavar="LOCATION", help=LEDGER_HELP + "; default: the config's")
    r.add_argument("--config", metavar="FILE", help="the server's TOML config (ledger, stores)")
    r.add_argument("--key", required=True, action="append", metavar="PUB", help=key_help)
    r.add_argument("--forget-key-env", metavar="NAME", help="variable holding the forget key")
    r.add_argument("--dry-run", action="store_true", help="list what would be done; change nothing")
    add_json_argument(r, "the result")
    add_forget_mode_flags(r, default=f"the --config file's forget_mode, else {RECORDED}")
    r.set_defaults(func=cmd_reapply)

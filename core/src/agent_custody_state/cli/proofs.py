"""``verify`` and ``checkpoint``: the chain's commands (``docs/proofs.md``).

``verify`` never opens a JSONL ledger through its backend: it reads the file's lines itself, so a
line the backend would refuse to load (an edit that broke its JSON) is reported by its position
like any other problem. Other ledgers are read through their backend's ``stored_events``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from agent_custody_state.cli.common import (
    CliError,
    add_forget_mode_flags,
    check_location,
    is_path,
    open_ledger,
    without_password,
)
from agent_custody_state.cli.inputs import (
    check_checkpoints_file,
    parsed_checkpoints,
    read_checkpoint_file,
    signing_key,
)
from agent_custody_state.cli.verify_opener import value_opener
from agent_custody_state.controltext import shown

#: Problems listed after the first one.
SHOWN = 10


def add_commands(sub: Any) -> None:
    """Add ``verify`` and ``checkpoint`` to the ``agent-custody-memory`` parser."""
    p = sub.add_parser(
        "verify", help="check a ledger's chain, its leaves and its signed checkpoints"
    )
    p.add_argument("--ledger", required=True, help="an existing ledger (path or URL)")
    p.add_argument(
        "--key",
        action="append",
        metavar="PUB",
        help="public key (or the private key) the checkpoints are signed by (repeatable: the "
        "keys before and after a rotation; each checkpoint must be signed by one of them)",
    )
    p.add_argument(
        "--checkpoint",
        action="append",
        metavar="FILE",
        help="checkpoints to check against (repeatable; default: the ledger's own)",
    )
    add_forget_mode_flags(
        p,
        default="the mode the ledger records; plain: sealed values' commitments are not checked",
        key_store="a crypto-shred ledger's key store (`default`: the ledger's own), so the "
        "commitments of sealed values are checked too (default: the one the ledger records)",
    )
    p.add_argument(
        "--jobs",
        type=_jobs,
        metavar="N",
        help="processes verifying chunks of the ledger at once (default: one per processor; "
        "1: in this process; with --key-store always 1); the report is the same",
    )
    p.add_argument("--json", action="store_true", help="machine-readable report")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("checkpoint", help="sign a checkpoint of a ledger's chain now")
    p.add_argument("--ledger", required=True, help="an existing ledger (path or URL)")
    p.add_argument("--key", required=True, metavar="K", help="Ed25519 private key (PKCS8 PEM)")
    p.add_argument(
        "--checkpoints", metavar="FILE", help="where to keep it (default: the ledger's own place)"
    )
    p.set_defaults(func=cmd_checkpoint)


def _jobs(text: str) -> int:
    try:
        jobs = int(text)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise argparse.ArgumentTypeError(f"a number of processes, 1 or more, not {text!r}")
    return jobs


def cmd_checkpoint(args: argparse.Namespace) -> int:
    key = signing_key(args.key)  # both before the ledger is opened: a refusal leaves no lock
    if args.checkpoints is not None:  # never appended to a file that holds something else
        check_checkpoints_file(args.checkpoints, "--checkpoints")
    with open_ledger(
        args,
        checkpoint_key=key,
        checkpoints=args.checkpoints,
        forget_mode="plain",
        changes=True,  # it keeps a checkpoint
    ) as ledger:  # the chain covers the events as stored: no value is read
        cp = ledger.checkpoint()
        log = ledger.backend.checkpoint_log()
        where = args.checkpoints or (log.location if log is not None else "?")
    print(cp.note(), end="")
    print(f"checkpoint of {cp.size} events kept in {where}", file=sys.stderr)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from agent_custody_state.backends.jsonl_lines import CutShort

    check_location(args.ledger, must_exist=True)
    if _is_jsonl(args.ledger):
        check_jsonl_ledger(args.ledger)
    public_key = _public_keys(args.key or [])
    try:
        report = _report(args, public_key)
    except CutShort:  # a forget in another process rewrote the file under the read: once more
        report = _report(args, public_key)
    if args.json:
        from agent_custody_state.cli.render import print_json

        print_json(_as_json(report))
    else:
        _print(without_password(args.ledger), report, signed=public_key is not None)
    return 0 if report.ok else 1


def _report(args: argparse.Namespace, public_key: Any) -> Any:
    """``verify``'s report on ``args.ledger`` and its checkpoints, read from the start."""
    from agent_custody_state.ledger.checkpoints import (
        of_no_ledger,
    )
    from agent_custody_state.ledger.verdict import add_foreign, foreign

    with _source(args.ledger) as (source, own_notes):
        if args.checkpoint:  # a pipe is read (<(...)), a device refused; errors name the file
            notes = [(f" (--checkpoint {n})", read_checkpoint_file(n)) for n in args.checkpoint]
        else:
            notes = [("", text) for text in own_notes()]
        checkpoints = parsed_checkpoints(notes)
        origin = _origin(args.ledger, source.backend) if checkpoints else None
        own, others = foreign(checkpoints, origin)
        empty = [cp for cp in others if of_no_ledger(cp)]
        others = [cp for cp in others if not of_no_ledger(cp)]
        with value_opener(args, jsonl=_is_jsonl(args.ledger)) as open_value:
            report = _verified(source, args.jobs, own, public_key, open_value)
        if origin is not None:
            add_foreign(report, others, origin)
        if empty:
            report.notes.append(
                f"{len(empty)} checkpoint(s) of size 0 signed while the ledger had no event "
                "name no ledger and state nothing: not checked"
            )
    return report


def _public_keys(names: list[str]) -> list[Any] | None:
    """The keys of every ``--key`` (None: no key given), each its own, once."""
    keys: dict[bytes, Any] = {}
    for name in names:  # ``keys`` imports ``cryptography`` (10-20 ms): only with a --key
        from agent_custody_state.keys import SigningKeyError, load_public_key

        try:
            key = load_public_key(name)
        except SigningKeyError as exc:
            raise CliError(f"--key: {exc}") from None
        keys.setdefault(key.public_bytes_raw(), key)
    return list(keys.values()) or None


def check_jsonl_ledger(location: str) -> None:
    """Refuse a non-empty file that holds no ledger event at all (a mistyped path, a key, a
    config): reported as events that do not parse, it would read as tampering. The test is on
    the bytes (``"eventId"`` anywhere in the file), so a ledger with any event left, however
    many lines were edited or replaced, is verified and its damage reported."""
    marker, tail, blank = b'"eventId"', b"", True
    with open(location, "rb") as fh:
        while chunk := fh.read(1 << 20):
            if marker in tail + chunk:
                return
            blank = blank and not chunk.strip()
            tail = chunk[-len(marker) :]
    if not blank:
        raise CliError(
            f"{location} is not a ledger: no line of it is a ledger event (a JSON object with "
            "eventId and kind); check the path"
        )


def _is_jsonl(location: str) -> bool:
    from agent_custody_state.plugins import get_plugin_manager

    return is_path(location) and get_plugin_manager().backend_for(location).name == "jsonl"


def _origin(location: str, backend: Any) -> str | None:
    """The checkpoint origin of the ledger (``checkpoints.ledger_origin``: its first event's
    id), or None when its first event cannot be read (the chain's check names it) or there is
    none."""
    from agent_custody_state import fastjson
    from agent_custody_state.ledger.checkpoints import ORIGIN_PREFIX

    try:
        if backend is None:  # JSONL: the file's first line
            with open(location, "rb") as f:
                event_id = fastjson.loads(f.readline()).get("eventId")
        else:
            first = backend.first_event()
            event_id = first.event_id if first is not None else None
    except Exception:  # not an event: the chain's check reports event 1
        return None
    return ORIGIN_PREFIX + event_id if isinstance(event_id, str) else None


def _verified(source: Any, jobs: int | None, checkpoints: Any, key: Any, opener: Any) -> Any:
    """The report on ``source`` (``_source``): its chunks read by the workers (``verify_stored``)
    when they run, else its events read here with the backend's own index problems
    (``EventBackend.index_problems``) asked on a thread meanwhile (the database does that work
    without the interpreter's lock), added to the report."""
    from concurrent.futures import ThreadPoolExecutor

    from agent_custody_state.ledger.parallel import default_jobs, verify_parallel, verify_stored

    options = {"jobs": jobs, "checkpoints": checkpoints, "public_key": key, "open_value": opener}
    workers = opener is None and (jobs or default_jobs()) > 1
    lines, backend, chunks = source
    if chunks is not None and workers:
        return verify_stored(chunks, **options)
    if backend is None:  # JSONL: its index is its lines
        return verify_parallel(lines, **options)
    with ThreadPoolExecutor(1, thread_name_prefix="index-check") as pool:
        found = pool.submit(backend.index_problems)
        report = verify_parallel(lines, **options)
        for seq, reason in found.result():
            report.add(seq, reason)
    return report


class Source(NamedTuple):
    """What ``verify`` reads: the stored events, the backend whose index to check (None: a
    JSONL file read directly), and the chunks its workers can read themselves (or None)."""

    lines: Any
    backend: Any
    chunks: Any


@contextmanager
def stored(location: str) -> Iterator[tuple[Any, Any]]:
    """The ledger's stored events and a callable giving its own checkpoint notes."""
    with _source(location, chunked=False) as (source, notes):
        yield source.lines, notes


@contextmanager
def _source(location: str, *, chunked: bool = True) -> Iterator[tuple[Any, Any]]:
    """What ``verify`` reads (``Source``; its chunks only when ``chunked``) and a callable giving
    the ledger's own checkpoint notes."""
    if _is_jsonl(location):
        from agent_custody_state.backends.jsonl_files import checkpoint_log, target_of
        from agent_custody_state.backends.jsonl_lines import stored_lines

        path = Path(location)
        own = checkpoint_log(path)  # beside the file itself, whatever spelling names it
        lock = f"{target_of(path)}.lock"  # through a symlink, the writers' lock is beside the file
        fd = os.open(lock, os.O_RDONLY) if os.path.exists(lock) else None
        try:
            notes = lambda: ["\n".join(own.notes())]  # noqa: E731
            yield Source(stored_lines(path, fd), None, None), notes
        finally:
            if fd is not None:
                os.close(fd)
        return
    # Plain mode: the events as stored (envelopes sealed), which the chain's leaves cover.
    with open_ledger(
        argparse.Namespace(ledger=location), chain=False, forget_mode="plain"
    ) as ledger:
        from agent_custody_state.ledger.parallel import CHUNK

        backend = ledger.backend
        log = backend.checkpoint_log()
        chunks = backend.stored_chunks(CHUNK) if chunked else None
        source = Source(backend.stored_events(), backend, chunks)
        yield source, lambda: ["\n".join(log.notes())] if log else []


def _as_json(report: Any) -> dict[str, Any]:
    first = report.first
    return {
        "ok": report.ok,
        "events": report.events,
        "genesis": report.genesis,
        "head": report.head,
        "checkpoints": report.checkpoints_checked,
        "firstBad": {"seq": first.seq, "reason": first.reason} if first else None,
        "problems": [{"seq": p.seq, "reason": p.reason} for p in sorted(report.problems)],
        "problemCount": report.problem_count,
        "notes": report.notes,
    }


def _print(location: str, report: Any, *, signed: bool) -> None:
    for note in report.notes:
        print(f"note: {note}", file=sys.stderr)
    if report.ok:
        start = f"from genesis at event {report.genesis}" if report.genesis else "not started"
        checked = f"{report.checkpoints_checked} checkpoint(s)"
        if report.checkpoints_checked:
            checked += " (signatures verified)" if signed else " (signatures not checked)"
        print(
            shown(f"ok: {location}: {report.events} events, chain {start}, head {report.head}, ")
            + checked
        )
        return
    problems = sorted(report.problems)
    print(f"FAILED: {location}: first bad event {problems[0].seq}: {problems[0].reason}")
    for problem in problems[1 : 1 + SHOWN]:
        print(f"  event {problem.seq}: {problem.reason}")
    more = report.problem_count - 1 - min(SHOWN, len(problems) - 1)
    if more > 0:
        print(f"  ... and {more} more")

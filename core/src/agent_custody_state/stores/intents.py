"""Erasure intents: what a certificates folder records before a forget, so that a process
killed between the forget's commit and its certificate's write does not lose the certificate
for good (``CertificateArchive``, ``flows``, ``sweeping``).

Before a forget (or each pass of a sweep) with an archive, ``record`` writes
``<folder>/.intent-<random>`` (hidden, not ``*.json``): the fact ids, the request (actor,
reason, receipt id), the time, where the ledger stood (``position``: its events then), how
each value is stored (plain or sealed) and the process; nothing of the value nor derived from
it. Once the flow has kept its certificates the intent is removed (``settle``). One a kill left
is finished at the next start of whatever keeps certificates in that folder
(``Custody.resume``: ``serve``, ``forget --config``, ``sweep --config``): each fact the ledger
shows forgotten by that request, after the intent (its forget's chain ``seq`` past the
intent's position; for an intent written without one, a forget not older than its time), and
whose certificate the folder does not hold, gets a certificate issued now (``recovered``) that
says what could not be done: the byte scan cannot be repeated (the value is gone), and the stores'
removals were not checked (``unknown``; the outbox finishes them at the same start; a store
not configured there ``notConfigured``, ``NOT_HERE``: that start's outbox leaves its removal to
a process with the store), unless the flow that settles it checked them (``checked``: a forget whose certificate failed). It is
signed as usual, ``partial``, and ``certificate verify`` reads it as any other (the fields are
added, none changed). A fact not forgotten (the forget never committed) is dropped with its
intent. ``certificate reapply`` lists ``*.json`` in the folder only, so it never reads one.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import secrets
import socket
from collections.abc import Callable, Collection, Iterable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_custody_state.backends.jsonl_recovery import fsync_dir
from agent_custody_state.ledger.certificate import (
    CertificateOptions,
    Forgetting,
    draft,
    media_location,
    sign,
    with_stores,
)
from agent_custody_state.ledger.chain import ZERO_HEAD, ChainHead, chain_record
from agent_custody_state.ledger.checkpoints import ledger_origin
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.model import AssertEvent, ForgetEvent
from agent_custody_state.processes import alive, own_start
from agent_custody_state.stores import intent_files
from agent_custody_state.stores.archive import CertificateArchive, file_name, write_new
from agent_custody_state.stores.owed import LEFT_ELSEWHERE
from agent_custody_state.stores.stored_kinds import mode_of, shredding
from agent_custody_state.stores.stored_kinds import stored_kinds as stored_kinds
from agent_custody_state.timeutil import format_time, utc_now

if TYPE_CHECKING:
    from agent_custody_state.stores.certificate import StoresPart

log = logging.getLogger(__name__)

PREFIX = ".intent-"
KIND = "agent-custody-erasure-intent/v1"
NOT_REPEATED = (
    "the byte scan of the ledger's files could not be repeated: the process stopped, or could "
    "not keep the certificate, between the forget and its certificate, and the value is gone"
)
STORES_UNKNOWN = (
    "not checked: the certificate was not kept when it was made (the process stopped, or the "
    "disk refused it); the outbox, when kept, "
    "finishes the removal at the next start (its log says how)"
)
#: a store not configured in the process that issues the recovered certificate (``store_named``)
NOT_HERE = (
    "not checked: the certificate was not kept when it was made (the process stopped, or the "
    "disk refused it), and store {name} is not configured in the process that issued it: "
    "where the removal of its copy is still owed, it stays owed in the outbox, " + LEFT_ELSEWHERE
)


@dataclass(frozen=True)
class Intent:
    """One recorded intent: its file and what it names."""

    path: Path
    facts: tuple[str, ...]
    actor: str
    reason: str
    receipt_id: str | None
    at: str
    #: how each value was stored (``crypto-shred`` or ``plain``), read before the forget: a
    #: forget leaves nothing that says it (the sealed value goes with the data key)
    stored: dict[str, str] = field(default_factory=dict)
    #: the process that recorded it (host, pid): one still running is not finished by another
    owner: tuple[str, int] = ("", 0)
    #: the ledger's events when it was recorded, before its forgets: only a forget at a later
    #: position is its own (None: an intent written before it was recorded; its time decides)
    position: int | None = None


#: the intents this process recorded and has not dropped yet (its flows in progress)
_LIVE: set[Path] = set()


def record(
    archive: CertificateArchive,
    facts: Collection[str],
    actor: str,
    reason: str,
    receipt_id: str | None,
    stored: dict[str, str] | None = None,
    at: str | None = None,
    position: int | None = None,
) -> Intent | None:
    """Write the intent, fsynced, before the forgets; None (an ERROR logged) when the disk
    refuses it: the forget goes on, as a certificate the disk refuses does not undo it.
    ``at``: the ledger's time now (``Ledger.now``), on the clock that stamps the forgets it is
    compared with (``_forgotten_by``); the wall clock's without it. ``position``: the
    ledger's events now (``keeping.position``), which decides instead when given."""
    at = at or format_time(utc_now())
    body: dict[str, Any] = {
        "kind": KIND,
        "facts": list(facts),
        "request": {"actor": actor, "reason": reason, "receiptId": receipt_id},
        "at": at,
        "stored": dict(stored or {}),
        "owner": {"host": socket.gethostname(), "pid": os.getpid(), "started": own_start()},
    }
    if position is not None:
        body["position"] = position
    folder = archive.folder
    path = folder / f"{PREFIX}{secrets.token_hex(12)}"
    try:
        write_new(path, (json.dumps(body) + "\n").encode(), mode=0o600)
    except OSError as exc:
        log.error(
            "could not record the erasure intent in %s (%s): a kill before the certificate "
            "is kept would lose it",
            folder,
            exc.strerror or exc,
        )
        return None
    _LIVE.add(path)
    owner = (socket.gethostname(), os.getpid())
    kinds = dict(stored or {})
    return Intent(path, tuple(facts), actor, reason, receipt_id, at, kinds, owner, position)


def pending(archive: CertificateArchive) -> list[Intent]:
    """The intents a stopped process left in the folder (an unreadable one is logged, kept);
    not those of a flow still running, here or in another process of this host. The stale
    temporaries a kill left there are removed first (``remove_stale_temporaries``)."""
    archive.remove_stale_temporaries()
    found: list[Intent] = []
    for path in sorted(archive.folder.glob(f"{PREFIX}*")):
        if path.name.endswith(".partial"):  # a temporary of ``write_new``
            continue
        if path in _LIVE:
            continue
        try:  # unsigned, yet a certificate is signed from it: read safely, checked
            body = json.loads(intent_files.read_bytes(path))
            request = body["request"]
            owner = body.get("owner") or {}
            if _running(str(owner.get("host", "")), owner.get("pid"), owner.get("started")):
                continue
            found.append(
                Intent(
                    path,
                    intent_files.checked_facts(body["facts"]),
                    str(request["actor"]),
                    str(request["reason"]),
                    request.get("receiptId"),
                    intent_files.checked_time(body["at"]),
                    {str(k): str(v) for k, v in dict(body.get("stored") or {}).items()},
                    position=intent_files.checked_position(body.get("position")),
                )
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("erasure intent %s cannot be read (%s); left as it is", path, exc)
    return found


def _running(host: str, pid: Any, started: Any = None) -> bool:
    """Whether the process that recorded an intent still runs (another one of this host: a
    second server on the folder, its forget in progress): its pid, and the start it recorded
    (boot id and start time, ``processes.process_start``), so a pid reused since, or a
    reboot, is not taken for it; another host's cannot be asked."""
    if host != socket.gethostname() or type(pid) is not int or pid <= 0 or pid == os.getpid():
        return False
    return alive(pid, started if isinstance(started, str) else None)


def release(intent: Intent) -> None:
    """The flow that recorded ``intent`` ended without finishing it (stopped, or failed after
    its forgets): leave its file to the next ``pending``, this process's own included. Before,
    it stayed "live" for as long as the process ran: a later ``Custody.resume`` in it skipped
    the intent, so the certificates it owes waited for the process to end."""
    _LIVE.discard(intent.path)


def drop(intent: Intent) -> None:
    """The intent's work is done (or it never began): remove it."""
    _LIVE.discard(intent.path)
    with suppress(OSError):
        intent.path.unlink()
    with suppress(OSError):
        fsync_dir(intent.path.parent)


def settle(
    archive: CertificateArchive,
    ledger: Ledger,
    intent: Intent,
    options: CertificateOptions,
    skip: Collection[str] = (),
    *,
    final: bool = True,
    mine: Collection[str] | None = None,
    checked: Mapping[str, StoresPart] | None = None,
    store_named: Callable[[str], object] | None = None,
) -> list[Path]:
    """Finish ``intent``: a certificate for each fact it names, forgotten by its request,
    that is not in ``skip`` (fact ids the flow issued one for) nor in the folder; the intent
    removed once every one is kept, unless ``final`` is false (a certificate the flow issued
    but could not keep: the next start issues it again, here). ``mine``: the forget event ids
    the flow committed, when it knows them (another process's forget of a listed fact is not
    this flow's to certify). ``checked``: per fact, its stores as the flow found them;
    ``store_named``: the store of a name configured here, or None (``recovered``). Returns the
    files written."""
    todo = [f for f in intent.facts if f not in skip]
    written: list[Path] = []
    complete = final
    with intent_files.claimed(intent.path) as alone:  # one finisher at a time (two starts)
        if not alone:
            _LIVE.discard(intent.path)
            return written  # another finisher holds it, or has finished it
        owed = recovered(archive, ledger, intent, todo, options, mine, checked, store_named)
        for fact_id, envelope in owed:
            path = archive.keep_logged(fact_id, envelope)
            if path is None:
                complete = False
            else:
                written.append(path)
                log.warning(
                    "issued the erasure certificate of fact %s, not kept when its forget was made "
                    "(the process stopped, or the disk refused it; byte scan not repeated): %s",
                    fact_id,
                    path,
                )
        if complete:
            drop(intent)
    _LIVE.discard(intent.path)  # its flow is over: a later start finishes what is left
    return written


def recovered(
    archive: CertificateArchive,
    ledger: Ledger,
    intent: Intent,
    fact_ids: Iterable[str],
    options: CertificateOptions,
    mine: Collection[str] | None = None,
    checked: Mapping[str, StoresPart] | None = None,
    store_named: Callable[[str], object] | None = None,
) -> list[tuple[str, dict[str, Any]]]:
    """The certificates owed for ``fact_ids`` of ``intent``, signed (``recovered``): each
    store ``unknown`` (``notConfigured`` when ``store_named`` finds none of its name here:
    ``unchecked``), or as the flow found it when ``checked`` has the fact (its removal
    report, as a certificate made at once names it: ``stores.certificate.stores_part``)."""
    found: dict[str, tuple[AssertEvent, ForgetEvent]] = {}
    for fact_id in fact_ids:
        pair = _forgotten_by(ledger, intent, fact_id)
        if pair is None or (mine is not None and pair[1].event_id not in mine):
            continue
        if not _certified(archive, fact_id, pair[1].event_id):
            found[fact_id] = pair
    if not found:
        return []
    heads = _heads(ledger, {forget.event_id for _, forget in found.values()})
    origin = ledger_origin(ledger.backend)
    now = format_time(utc_now())
    out: list[tuple[str, dict[str, Any]]] = []
    for fact_id, (assert_event, forget) in found.items():
        around = heads.get(forget.event_id)
        if around is None:
            log.error("fact %s: its forget carries no chain record; no certificate", fact_id)
            continue
        stored = intent_files.checked_kind(intent.stored.get(fact_id), shredding(ledger))
        stored = stored or mode_of(ledger)
        done = Forgetting(assert_event, forget, around[0], around[1], stored)
        predicate = draft(
            done,
            backend=ledger.backend.kind,
            ledger_id=origin,
            location=media_location(ledger.backend),
            forget_mode=ledger.forget_mode,
            scan=None,
            options=options,
            now=now,
        )
        predicate["verification"]["byteScan"] = {"scanned": False, "why": NOT_REPEATED}
        predicate["verification"]["notRepeated"] = NOT_REPEATED
        predicate["recovered"] = {"intentAt": intent.at, "issuedAt": now, "why": NOT_REPEATED}
        names = sorted(assert_event.fact.external or {})
        part = (checked or {}).get(fact_id) or ([unchecked(n, store_named) for n in names], [])
        stores, windows = part
        predicate = with_stores(predicate, stores, now, windows)
        out.append((fact_id, sign(predicate, done, options.key)))
    return out


def unchecked(name: str, store_named: Callable[[str], object] | None) -> dict[str, Any]:
    """The entry of a store whose removal this process did not check: ``unknown``, which the
    outbox finishes here, or ``notConfigured`` when ``store_named`` finds no store of that name
    here: a start here leaves its removal owed (``NOT_HERE``)."""
    entry: dict[str, Any] = {"name": name, "acknowledged": False, "verification": "unknown"}
    if store_named is None or store_named(name) is not None:
        return {**entry, "error": STORES_UNKNOWN}
    return {**entry, "verification": "notConfigured", "error": NOT_HERE.format(name=name)}


def _forgotten_by(
    ledger: Ledger, intent: Intent, fact_id: str
) -> tuple[AssertEvent, ForgetEvent] | None:
    """The fact's assert and forget, when the forget is the intent's: its request, after it.

    After it by position when both say one (the forget's chain ``seq``, past the events the
    ledger held when the intent was recorded): a clock stepped back between the intent and
    its forget, or a forget of the same millisecond just before the intent, fooled the time.
    By time otherwise (an intent of an older version; a forget without a chain record, which
    no certificate can be issued for anyway: ``recovered``)."""
    assert_event: AssertEvent | None = None
    forget: ForgetEvent | None = None
    for event in ledger.backend.events_for([fact_id]):
        if isinstance(event, AssertEvent) and event.fact.fact_id == fact_id:
            assert_event = event
        elif isinstance(event, ForgetEvent) and event.fact_id == fact_id:
            forget = event
    if assert_event is None or forget is None:
        return None  # the forget never committed
    if (forget.actor, forget.reason) != (intent.actor, intent.reason) or (
        intent.receipt_id is not None and forget.source.receipt_id != intent.receipt_id
    ):
        return None  # another request's forget: not this intent's to certify
    record = chain_record(forget)
    if intent.position is not None and record is not None:
        if record["seq"] <= intent.position:
            return None  # committed before the intent: its certificate is another's
    elif forget.tx_time < intent.at:
        return None  # forgotten before the intent: its certificate is another's
    return assert_event, forget


def _certified(archive: CertificateArchive, fact_id: str, forget_id: str) -> bool:
    """Whether the folder holds a certificate of this forget (kept before the kill)."""
    from agent_custody_state.ledger.certverify import read_json

    base = file_name(fact_id)
    for path in archive.folder.glob(f"{base}*.json"):
        if path.name != f"{base}.json" and not path.name[len(base) + 1 : -5].isdigit():
            continue
        try:
            envelope = read_json(path.read_bytes())
            statement = json.loads(base64.b64decode(envelope["payload"]))
            if statement["predicate"]["request"]["forgetEventId"] == forget_id:
                return True
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return False


def _heads(ledger: Ledger, forget_ids: set[str]) -> dict[str, tuple[ChainHead, ChainHead]]:
    """The chain head just before and just after each forget (read in append order)."""
    heads: dict[str, tuple[ChainHead, ChainHead]] = {}
    previous: ChainHead = ChainHead(0, ZERO_HEAD)
    for event in ledger.backend.iter_events():
        record = chain_record(event)
        after = ChainHead(record["seq"], record["head"]) if record is not None else None
        if event.event_id in forget_ids and after is not None:
            genesis = record.get("genesis") if record is not None else None
            before = (
                ChainHead(genesis["size"], genesis["head"])
                if isinstance(genesis, dict)
                else previous
            )
            heads[event.event_id] = (before, after)
            if len(heads) == len(forget_ids):
                break
        if after is not None:
            previous = after
    return heads

"""What a verification of the chain reports (``verify``), and the verifier's state between two
events, which ``parallel`` compares at the boundaries of the chunks it verifies apart.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from agent_custody_state.ledger.chain import ZERO_HEAD
from agent_custody_state.ledger.checkpoints import Checkpoint

if TYPE_CHECKING:
    from agent_custody_state.ledger.checkpoints import VerifyKeys

#: Problems kept in a report (the count goes on).
MAX_PROBLEMS = 1000


@dataclass(frozen=True, order=True)
class Problem:
    """Event ``seq`` (1-based position in the ledger) is bad, and why."""

    seq: int
    reason: str


@dataclass
class VerifyReport:
    """What ``verify_lines`` found."""

    events: int = 0
    genesis: int | None = None  # seq of the first chained event
    head: str = ZERO_HEAD  # the head after the last event
    problems: list[Problem] = field(default_factory=list)
    problem_count: int = 0
    notes: list[str] = field(default_factory=list)
    checkpoints_checked: int = 0

    @property
    def ok(self) -> bool:
        return self.problem_count == 0

    @property
    def first(self) -> Problem | None:
        # The lowest position; among problems there, the one found first.
        return min(self.problems, key=lambda p: p.seq) if self.problems else None

    def add(self, seq: int, reason: str) -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(Problem(seq, reason))


class State(NamedTuple):
    """The verifier between two events: the running head, whether the chain has started, the
    events without a record since the last chained one, whether the last event was unreadable."""

    running: bytes
    started: bool
    gap: tuple[int, int] | None
    unknown_link: bool


#: Before the first event.
START = State(bytes(32), False, None, False)


def fingerprint(fact_id: str) -> int:
    """A fact id's 64-bit fingerprint, the same in every process (``Forgets``)."""
    digest = hashlib.blake2b(fact_id.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


class Forgets:
    """Which facts hold a value and which were forgotten. A forget changes no leaf, so an
    assert's line copied back from before its forget (its value and salt again, no
    ``forgotten``) verifies on its own, and a fact asserted again under a forgotten fact's id
    does too: only the forget event tells the value should be gone. Each assert holding a value
    is kept as 16 bytes (its fact id's fingerprint and its position), each intact forget event
    by its fact's fingerprint; ``problems`` pairs them once every event is read. The fingerprint
    is Python's string hash in one process (the cheapest), ``fingerprint`` when processes
    exchange them (``stable``: ``parallel``'s workers and merge)."""

    def __init__(self, stable: bool = False) -> None:
        self.live = array("q")  # fingerprints of asserts that hold a value
        self.at = array("Q")  # their positions
        self.gone: dict[int, int] = {}  # fingerprint of a forgotten fact -> its forget's position
        self.print = fingerprint if stable else hash

    def holds(self, fact_id: str, seq: int) -> None:
        self.live.append(self.print(fact_id))
        self.at.append(seq)

    def forgot(self, fact_id: str, seq: int) -> None:
        self.gone.setdefault(self.print(fact_id), seq)

    def problems(self) -> Iterator[tuple[int, str]]:
        gone = self.gone
        if not gone or not any(map(gone.__contains__, self.live)):
            return
        for fp, seq in zip(self.live, self.at, strict=True):
            if fp in gone:
                yield (
                    seq,
                    (
                        f"the fact holds a value, but a forget event ({gone[fp]}) erased it: the "
                        "assert was copied back from before the forget, or asserted again"
                    ),
                )


TWICE_FORGOTTEN = "a key appears twice in this forgotten fact: an erased value may be back"
TWICE = (
    "a key appears twice in this event: a reader keeping the first of two keys (SQLite's "
    "json_extract, which fills and checks the query columns) reads another event than the "
    "chain covers"
)
NO_KEY = (
    "the sealed value's key is not in the key store, but the fact is not forgotten: it reads "
    "as null (its key id was edited, its key destroyed without a forget, or the key store "
    "restored from a backup older than the fact)"
)

KEY_BACK = (
    "fact {fact} is forgotten, but its data key {kid} is in the key store: a key store restored "
    "from a backup taken before the forget opens every old copy of the value; destroy it "
    "again with `repair --forget-mode crypto-shred` or `certificate reapply`"
)


class RestoredKeys:
    """The facts marked forgotten, checked when the verification ends against the key store
    (``restored``: fact id -> the data keys it holds again of these facts, from its erasure log;
    None, without a key store: nothing is kept). A key still there came back with a key store
    restored from a backup taken before the forget."""

    def __init__(self, restored: Callable[[Collection[str]], dict[str, list[str]]] | None) -> None:
        self.restored = restored
        self.forgotten: dict[str, int] = {}  # fact id -> the seq of its forgotten assert

    def add(self, seq: int, fact_id: str) -> None:
        if self.restored is not None:
            self.forgotten[fact_id] = seq

    def problems(self) -> Iterator[tuple[int, str]]:
        if self.restored is None or not self.forgotten:
            return
        for fact_id, kids in self.restored(self.forgotten).items():
            yield self.forgotten[fact_id], KEY_BACK.format(fact=fact_id, kid=", ".join(kids))


def signatures(
    report: VerifyReport, checkpoints: list[Checkpoint], public_key: VerifyKeys | None
) -> VerifyReport:
    """``report`` with each checkpoint's signature checked by ``public_key`` (or a note that
    they were not): the last step of a verification, after ``finish``."""
    for cp in checkpoints:
        if public_key is None:
            continue
        why = cp.check_signature(public_key)
        if why is not None:
            where = min(cp.size, report.events + 1) or 1
            report.add(where, f"the checkpoint of size {cp.size}: {why}")
    if checkpoints and public_key is None:
        report.notes.append("checkpoint signatures not checked: no public key given (--key)")
    if public_key is not None and not checkpoints and report.events:
        # The chain itself has no key: only a signed checkpoint binds the history to its signer.
        report.notes.append(KEY_BINDS_NOTHING)
    return report


def foreign(
    checkpoints: list[Checkpoint], origin: str | None
) -> tuple[list[Checkpoint], list[Checkpoint]]:
    """``checkpoints`` split into those signed for the ledger named ``origin`` (its first
    event's id, ``checkpoints.ledger_origin``) and the others; None: all are its own (the
    first event could not be read, which the chain's check names)."""
    if origin is None:
        return checkpoints, []
    return (
        [cp for cp in checkpoints if cp.origin == origin],
        [cp for cp in checkpoints if cp.origin != origin],
    )


def add_foreign(report: VerifyReport, checkpoints: list[Checkpoint], origin: str) -> VerifyReport:
    """``report`` with each checkpoint signed for another ledger than ``origin`` named: its head
    is not compared (it is another history), and it binds nothing of this one. Either the
    checkpoint is another ledger's, or this ledger's first event (which names it) was replaced,
    and with it, if its chain still verifies, the whole history after it."""
    for cp in checkpoints:
        report.checkpoints_checked += 1
        report.add(
            min(cp.size, report.events + 1) or 1,
            f"the checkpoint of size {cp.size} was signed for another ledger ({cp.origin}; "
            f"this one is {origin}): a checkpoint of another ledger, or this ledger's first "
            "event was replaced and its history rewritten",
        )
    return report


#: ``--key`` given, but no checkpoint to check it against.
KEY_BINDS_NOTHING = (
    "a public key was given but there is no checkpoint to check it against: nothing binds this "
    "history to a signature (checkpoints never written, or deleted); anyone able to write the "
    "ledger could have rewritten it whole"
)

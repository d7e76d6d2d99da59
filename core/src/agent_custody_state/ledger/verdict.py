"""What a verification of the chain reports (``verify``), and the verifier's state between two
events, which ``parallel`` compares at the boundaries of the chunks it verifies apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from agent_custody_state.ledger.chain import ZERO_HEAD
from agent_custody_state.ledger.checkpoints import Checkpoint

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


def signatures(
    report: VerifyReport, checkpoints: list[Checkpoint], public_key: Ed25519PublicKey | None
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
    return report

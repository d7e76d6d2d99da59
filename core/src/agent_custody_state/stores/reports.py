"""The typed reports of the custody flows (``flows.Custody``): what a write, a sweep and a sweep
preview did. The server turns them into the tools' JSON (``server/shapes.py``); the command line
prints them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent_custody_state.ledger.model import AssertEvent, ForgetEvent
from agent_custody_state.ledger.retention import RetentionPolicy
from agent_custody_state.stores.mirror import Restore
from agent_custody_state.stores.storeset import RemovalReport


@dataclass
class WriteReport:
    """A write: the assert appended and, if it superseded a fact, that fact's removal from the
    mirroring stores (None when there was nothing to mirror)."""

    event: AssertEvent
    mirror: RemovalReport | None = None


@dataclass
class SweptFact:
    """One fact a sweep forgot, its removal from the stores that held it, and its signed
    erasure certificate when the sweep was asked for them."""

    event: ForgetEvent
    removal: RemovalReport = field(default_factory=RemovalReport)
    certificate: dict[str, Any] | None = None
    #: the fact its forget made current again, put back into the mirroring stores
    restored: Restore | None = None


@dataclass
class SweepReport:
    """A sweep: the cutoff (or the retention windows used), what was forgotten, what was held."""

    before: str | None
    retention: RetentionPolicy | None
    space: str | None
    forgotten: list[SweptFact] = field(default_factory=list)
    held: list[str] = field(default_factory=list)

    @property
    def still_held(self) -> list[str]:
        """Fact ids some store could not remove."""
        return [s.event.fact_id for s in self.forgotten if s.removal.still_held]

    def problems(self) -> list[str]:
        """``<store> (<fact>): <message>`` for every failed removal."""
        return [
            f"{name} ({s.event.fact_id}): {message}"
            for s in self.forgotten
            for name, message in s.removal.still_held.items()
        ]


@dataclass
class SweepPreview:
    """What a sweep would do now (``Custody.plan_sweep``): the facts it would forget, the held
    ones it would keep and, per fact, the stores that hold it now (when asked for)."""

    before: str | None
    retention: RetentionPolicy | None
    space: str | None
    forget: list[AssertEvent] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    holders: dict[str, list[str]] = field(default_factory=dict)

"""Retention sweeps through the server: explicit ``before`` or the retention windows, then stores.

Shared by ``memory.sweep`` and ``agent-custody-memory sweep --config`` so both reach the stores
the same way. With ``before`` one cutoff applies to the space given (or all spaces); without it
each space gets the cutoff of its most specific retention window, and a space no window matches
is never swept (SPEC 2.8).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..ledger.model import Fact, ForgetEvent
from ..timeutil import format_time, parse_time
from .results import ToolResult

if TYPE_CHECKING:
    from .service import MemoryService

SWEEP_NEEDS_BEFORE = "sweep needs `before`, or a server started with retention windows"


def _cutoffs(svc: MemoryService, before: str | None, space: str | None) -> list[tuple[str | None, str]]:
    if before is not None:
        return [(space, before)]
    assert svc.retention is not None
    now = parse_time(svc.ledger.now())
    spaces = [space] if space is not None else svc.ledger.spaces()
    plan: list[tuple[str | None, str]] = []
    for name in spaces:
        window = svc.retention.window_for(name)
        if window is not None:
            plan.append((name, format_time(window[1].before(now))))
    return plan


async def run_sweep(
    svc: MemoryService, *, before: str | None, space: str | None, actor: str, reason: str,
    receipt_id: str | None, keep_digest: bool,
) -> ToolResult:
    """Sweep the ledger, then remove each forgotten fact from the stores holding it."""
    if before is None and svc.retention is None:
        return ToolResult.error(SWEEP_NEEDS_BEFORE)

    def sweep_ledger() -> tuple[list[ForgetEvent], list[str], dict[str, Fact]]:
        forgotten: list[ForgetEvent] = []
        held: list[str] = []
        copies: dict[str, Fact] = {}
        for where, cutoff in _cutoffs(svc, before, space):
            if svc.stores:
                # Keep the values the stores must find again to remove and verify, with the
                # ids the stores hold them under now (a fact put back has new ones).
                for f in svc.ledger.learned_before(cutoff, where):
                    external = svc.ledger.current_external(f.fact_id)
                    if external:
                        copies[f.fact_id] = f.with_(external=external)
            result = svc.ledger.sweep(
                before=cutoff, space=where, actor=actor, reason=reason, receipt_id=receipt_id,
                keep_digest=keep_digest,
            )
            forgotten.extend(result.forgotten)
            held.extend(result.held)
        return forgotten, held, copies

    forgotten, held, copies = await svc.worker.run(sweep_ledger)
    entries: list[dict[str, Any]] = []
    still_held: list[str] = []
    problems: list[str] = []
    for event in forgotten:
        entry: dict[str, Any] = {
            "factId": event.fact_id, "valueDigest": event.value_digest,
            "digestKind": event.digest_kind, "removedFrom": [], "verification": {},
        }
        fact = copies.get(event.fact_id)
        if fact is not None:
            report = await svc.stores.remove_all(fact)
            entry["removedFrom"], entry["verification"] = report.removed_from, report.verification
            if report.still_held:
                still_held.append(event.fact_id)
                problems.extend(f"{name} ({event.fact_id}): {message}"
                                for name, message in report.still_held.items())
        entries.append(entry)
    data = {
        "before": before,
        "retention": svc.retention.as_dict() if before is None and svc.retention else None,
        "space": space,
        "forgotten": entries,
        "held": held,
        "stillHeld": still_held,
    }
    if problems:
        return ToolResult.partial(
            f"erased from the ledger, but still held by {'; '.join(problems)}", data
        )
    return ToolResult.ok(data)

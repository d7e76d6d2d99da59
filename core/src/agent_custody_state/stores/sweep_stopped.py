"""The words for a sweep a fact stopped part-way (a full disk), shared by ``memory.sweep`` and
the ``sweep`` command so both say the same true thing.

The flow (``sweeping``) reads what each pass forgot before the stop (``forgotten_before``) and
raises the error of the fact that stopped it with ``swept`` set: the ``SweepReport`` of what it
did before (those facts are forgotten, their removals from the stores tried, their certificates
issued). The error alone reads as if the sweep had changed nothing (the ledger's "the ledger is
unchanged" is true of that one fact only).
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import suppress

from agent_custody_state.ledger.certifying import NOT_AGAIN, CertificateNotMade
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.model import ForgetEvent
from agent_custody_state.ledger.queries import SweepResult
from agent_custody_state.ledger.stopped import stopped_result
from agent_custody_state.stores.reports import SweepReport

#: The attribute of a sweep's error naming the spaces of the passes it did not reach.
UNSWEPT = "unswept"


def mark_unswept(exc: BaseException, spaces: Iterable[str | None]) -> None:
    """Note on ``exc`` the spaces of the passes after the one it stopped (``UNSWEPT``)."""
    with suppress(AttributeError):
        setattr(exc, UNSWEPT, [space for space in spaces if space is not None])


def unswept(exc: BaseException | str) -> list[str]:
    """The spaces a sweep ``exc`` stopped did not reach (``mark_unswept``), else none."""
    found = getattr(exc, UNSWEPT, None)
    return list(found) if isinstance(found, list) else []


def forgotten_before(ledger: Ledger, listed: Iterable[str], exc: BaseException) -> SweepResult:
    """What a pass of the sweep ``exc`` stopped forgot of the facts ``listed``: the ledger's
    own account when ``exc`` carries it (``ledger.stopped``: with the full certificates), and
    the forget events the ledger shows of the others (a forget that committed, then failed: a
    directory that could not be synced; a read that failed after the forgets)."""
    result = stopped_result(exc) or SweepResult()
    known = {event.fact_id for event in result.forgotten}
    for fact_id in listed:
        if fact_id in known:
            continue
        events = [
            e
            for e in ledger.history(fact_id)
            if isinstance(e, ForgetEvent) and e.fact_id == fact_id
        ]
        if events:
            result.forgotten.append(events[-1])
    return result


def swept_before(exc: BaseException) -> SweepReport | None:
    """What the sweep ``exc`` stopped had forgotten before it, when it had forgotten anything."""
    report = getattr(exc, "swept", None)
    return report if isinstance(report, SweepReport) and report.forgotten else None


def stopped_text(exc: BaseException | str, report: SweepReport) -> str:
    """The error of a sweep ``exc`` (or the text to show of it) stopped after ``report``, true
    of the sweep: how many facts it forgot before, and which (those erasures stand), then why it
    stopped, with "the ledger is unchanged" said of that fact only; and the stores still
    holding a value, if any."""
    done = [swept.event.fact_id for swept in report.forgotten]
    text = str(exc).replace("the ledger is unchanged", "that fact is unchanged in the ledger")
    problems = report.problems()
    held = f"; some values are still held by stores: {'; '.join(problems)}" if problems else ""
    if isinstance(exc, CertificateNotMade) and not unswept(exc):  # it ran to its end
        return f"the sweep finished, and its store removals were tried: {text}{held}"
    if isinstance(exc, CertificateNotMade):  # a pass's certificates: it stopped before the rest
        text = text.replace(NOT_AGAIN, "a sweep again skips them (already forgotten)")
        rest = unswept(exc)
        spaces = f"space {rest[0]} was" if len(rest) == 1 else f"spaces {', '.join(rest)} were"
        return (
            "the sweep stopped after a pass whose certificates failed (its store removals were "
            f"tried); {spaces} not swept: {text}; once the cause is fixed, run the sweep again "
            f"to forget the rest{held}"
        )
    return (
        f"the sweep stopped after forgetting {_plural(len(done), 'fact')} ({some(done)}; "
        f"those erasures stand, their removals from the stores were tried), then: {text}; "
        f"run the sweep again to forget the rest{held}"
    )


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def some(ids: list[str], most: int = 10) -> str:
    """The first ``most`` ids, then how many more."""
    shown = ", ".join(ids[:most])
    return shown if len(ids) <= most else f"{shown} and {len(ids) - most} more"

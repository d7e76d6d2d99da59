"""The words of a ``sweep`` command that did not finish: stopped by a fact's error, interrupted
by Ctrl-C, or done with certificates it could not keep. Each says what stands (the facts
forgotten before), and who finishes what they are owed.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def plural(count: int, word: str) -> str:
    """``1 fact``, ``2 facts``."""
    return f"{count} {word}{'' if count == 1 else 's'}"


def not_kept(report: Any, archive: Any, *, printed: bool) -> str:
    """``; N certificates could not be kept in DIR ...`` (and each printed on standard output,
    unless ``--json`` printed them already), or empty. Every forget is done and cannot be
    certified again (its byte scan needed the value): exit 1, as for a store still holding."""
    ours = {swept.event.fact_id for swept in report.forgotten}  # not those the start finished
    missing = set(archive.not_kept) & ours if archive is not None else set()
    if not missing:
        return ""
    from agent_custody_state.stores.sweep_stopped import some

    if not printed:
        for swept in report.forgotten:
            if swept.event.fact_id in missing and swept.certificate is not None:
                sys.stdout.write(json.dumps(swept.certificate, indent=2) + "\n")
        sys.stdout.flush()
    return (
        f"; {plural(len(missing), 'certificate')} could not be kept in {archive.folder} (facts "
        f"{some(sorted(missing))}; the log says why): the facts are forgotten, and the "
        "certificates are printed on standard output: keep them, they cannot be issued again"
    )


def stopped(exc: Exception, report: Any, archive: Any, *, printed: bool) -> str:
    """The error of a sweep a fact stopped, true of the sweep, as ``memory.sweep`` says it
    (``stores.sweep_stopped``), then the certificates not kept (``printed``: by ``--json``)."""
    from agent_custody_state.stores.sweep_stopped import stopped_text

    return stopped_text(exc, report) + not_kept(report, archive, printed=printed)


def interrupted(exc: KeyboardInterrupt, archive: Any, outbox: Any, stores: bool) -> str:
    """What a sweep Ctrl-C stopped had done: the facts the ledger forgot before it (it carries
    them: ``ledger.stopped``), which stand, and who finishes what they are owed. The custody
    flow contacts no store after Ctrl-C: the removals wait in the outbox, the certificates in
    the erasure intent in the certificates folder (``stores.intents``), for the next start."""
    from agent_custody_state.ledger.stopped import stopped_result
    from agent_custody_state.stores.sweep_stopped import some

    result = stopped_result(exc)
    if result is None:  # after the ledger's part, or before it began
        return "sweep interrupted; run it again to finish (a fact forgotten stays forgotten)"
    if not result.forgotten:
        return "sweep interrupted before it forgot any fact"
    done = [event.fact_id for event in result.forgotten]
    text = (
        f"sweep interrupted after forgetting {plural(len(done), 'fact')} ({some(done)}); "
        "those erasures stand"
    )
    owed = []
    if outbox is not None:
        owed.append(f"their removals from the stores are kept in {outbox.path}")
    elif stores:
        text += "; the stores were not told, and no outbox keeps what they are owed"
    if archive is not None:
        owed.append(f"their certificates are kept as an intent in {archive.folder}")
    if owed:
        text += f"; {' and '.join(owed)}, for the next sweep, forget or server start to finish"
    return text + "; run the sweep again to forget the rest"

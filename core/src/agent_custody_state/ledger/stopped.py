"""What a sweep a fact stopped part-way had done (``LedgerForgetting.sweep``).

The forgets before the stop stand, whatever stopped it (an error, Ctrl-C, ``SystemExit``). The
exception that stopped the sweep carries them as ``sweep_result``, a ``SweepResult``: the facts
forgotten, the held ones met, and, when the sweep was asked for certificates, the full
certificate of each forgotten fact, made after their compaction as a complete sweep's are after
its last (one byte scan for all). A caller reports what was done and keeps those certificates
(the custody flow, ``stores.sweeping``). They cannot be made right after each forget instead: a
value still held by a fact the sweep forgets later would be found by that scan, so a complete
sweep's certificates would say it was left.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import suppress

from agent_custody_state.ledger.queries import SweepResult

log = logging.getLogger(__name__)

#: The attribute of the exception that holds the ``SweepResult`` of what was done before it.
SWEEP_RESULT = "sweep_result"


def carry(
    exc: BaseException, made: Callable[[], SweepResult], bare: Callable[[], SweepResult]
) -> None:
    """Put ``made()`` (the result with its certificates) on ``exc``; ``bare()`` (without) when
    the certificates cannot be made, logged: the custody flow then issues its ``recovered``
    certificates from its intent (``stores.intents``).

    ``exc`` may be any ``BaseException``: a ``KeyboardInterrupt`` (Ctrl-C in a long sweep) or
    ``SystemExit`` carries what was done as an error does, and the caller re-raises it. A second
    one while the certificates are made (their byte scan) gives up on them only: ``exc`` still
    carries the bare result and is raised, so the interruption is never lost."""
    try:
        result = made()
    except BaseException as failure:
        result = bare()
        log.error(
            "a sweep stopped after forgetting %d facts (%s); their certificates could not be "
            "made: %s",
            len(result.forgotten),
            exc,
            failure,
        )
    with suppress(AttributeError):
        setattr(exc, SWEEP_RESULT, result)


def stopped_result(exc: BaseException) -> SweepResult | None:
    """What the sweep ``exc`` stopped had done, when it carries it (``carry``)."""
    found = getattr(exc, SWEEP_RESULT, None)
    return found if isinstance(found, SweepResult) else None

"""What an exception's message is shown as in a log line, where a fact's value may be in play.

``masker(*values)`` is the ``maskedtrace.Shown`` of the layers that know what to mask: each
message with registered secrets and URL passwords replaced (``base.redact``), then ``values``'
strings masked, URL queries dropped and the length bounded (``withheld.withheld``). The server's
internal errors, its stdio encoder, a flow whose caller was cancelled (``finish``) and a
plugin's failed ``event_appended`` hook (``listeners``) log their tracebacks through it.
"""

from __future__ import annotations

from typing import Any

from agent_custody_state.ledger.model import Fact
from agent_custody_state.maskedtrace import Shown
from agent_custody_state.stores.base import fact_text, redact
from agent_custody_state.stores.withheld import withheld


def masker(*values: Any) -> Shown:
    """A message shown without ``values`` (strings, or containers of them), secrets, URL
    queries, or more than ``withheld.LIMIT`` characters."""

    def shown(text: str) -> str:
        return withheld(redact(text), *values)

    return shown


def fact_values(fact: Fact | None) -> tuple[Any, ...]:
    """What a store's message may quote of ``fact``: the text the stores receive and the value
    (``base.error_message`` masks the same)."""
    return () if fact is None else (fact_text(fact), fact.value)

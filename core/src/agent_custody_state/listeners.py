"""Every plugin's ``event_appended`` hook called on its own, so one that raises cannot silence
the others.

pluggy calls a hook's implementations in one loop and stops at the first exception: an audit
plugin registered before a plugin whose hook raised never heard of the event (docs/hooks.md
promises that a hook's exception "is logged and ignored", so each listener is a separate
promise). ``call_each`` calls them in pluggy's own order (last registered first, ``tryfirst``
and ``trylast`` honoured), each in its own ``try``, logging a failure with the plugin's name.
A hook wrapper (rare for a notification) changes how the others are called, so with one present
the hook is called through pluggy as one call, as before.
"""

from __future__ import annotations

import logging
from typing import Any

from agent_custody_state.ledger.model import Fact

log = logging.getLogger("agent_custody_state.plugins")


def call_each(hook: Any, **kwargs: Any) -> None:
    """Call each implementation of ``hook`` (a pluggy ``HookCaller``) with ``kwargs``; one that
    raises is logged and the rest are still called."""
    impls = hook.get_hookimpls()
    if any(getattr(i, "hookwrapper", False) or getattr(i, "wrapper", False) for i in impls):
        hook(**kwargs)
        return
    for impl in reversed(impls):  # pluggy's calling order
        try:
            impl.function(*[kwargs[name] for name in impl.argnames])
        except Exception as exc:
            _failed(exc, hook.name, impl.plugin_name, kwargs.get("event"))


def _failed(exc: Exception, hook: str, plugin: str, event: Any) -> None:
    """Log a plugin's failed hook with its traceback, each message shown without the event's
    fact (its text as the stores receive it, its value), secrets or URL queries: a plugin's
    error may quote the event it was given (a webhook's refusal echoing the body)."""
    # Imported here: the plugin manager loads at start-up, the stores' modules when needed.
    from agent_custody_state.maskedtrace import log_traceback
    from agent_custody_state.stores.masking import fact_values, masker

    fact = getattr(event, "fact", None)
    shown = masker(*fact_values(fact if isinstance(fact, Fact) else None))
    text = "the %s hook of plugin %s failed for event %s"
    log_traceback(
        log, logging.ERROR, exc, shown, text, hook, plugin, getattr(event, "event_id", "?")
    )

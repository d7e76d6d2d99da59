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
        except Exception:
            event = kwargs.get("event")
            log.exception(
                "the %s hook of plugin %s failed for event %s",
                hook.name,
                impl.plugin_name,
                getattr(event, "event_id", "?"),
            )

"""The options an event backend is opened with, checked against what its factory takes.

``Ledger(path, busy_timeout=2)`` hands ``busy_timeout`` to the backend serving ``path``
(``factory(location, **options)``, docs/hooks.md). A misspelt option (``buzy_timeout``,
``max_md``) used to be swallowed by a catch-all ``**options`` and the ledger opened with the
default the user meant to change: a 16 MB JSONL cap silently not lifted, a lock wait silently
kept short. The builtin backends now name every option they take, and the plugin manager holds
the options given to the factory's own signature before calling it: an option it does not take
is a ``TypeError`` (what Python raises for a bad call) naming the backend, the closest option and
the ones it takes. A factory that declares ``**options`` itself takes anything, as it says.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from .ledger.requests import did_you_mean

_NAMED = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)

#: ``Ledger()``'s own keywords: every other keyword goes to the backend, so a misspelt one
#: (``forget_mod="crypto-shred"``) arrives here and is answered with the closest of both
#: (a test holds this list to ``Ledger.__init__``'s signature).
LEDGER_KEYWORDS = frozenset(
    {
        "forget_key",
        "clock",
        "host",
        "forget_mode",
        "key_store",
        "chain",
        "checkpoint_every",
        "checkpoint_key",
        "checkpoints",
        "read_only",
    }
)


def taken_options(factory: Callable[..., Any]) -> frozenset[str] | None:
    """The keyword options ``factory`` takes after its location, or None when it takes any
    (``**options``) or its signature cannot be read (a builtin callable)."""
    try:
        parameters = list(inspect.signature(factory).parameters.values())
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    named = [p for p in parameters if p.kind in _NAMED]
    return frozenset(p.name for p in named[1:])  # the first is the location


def check_options(kind: str, factory: Callable[..., Any], options: Mapping[str, Any]) -> None:
    """Raise ``TypeError`` for an option in ``options`` that the ``kind`` backend's ``factory``
    does not take, before anything is opened."""
    taken = taken_options(factory)
    if taken is None:
        return
    unknown = sorted(name for name in options if name not in taken)
    if not unknown:
        return
    name = unknown[0]
    hint = did_you_mean(name, taken | LEDGER_KEYWORDS)
    if hint and hint.split("'")[1] not in taken:
        hint = hint.replace("did you mean ", "did you mean the ledger's ")
    accepted = ", ".join(sorted(taken)) or "none"
    raise TypeError(f"the {kind} backend takes no option {name!r}{hint}; its options: {accepted}")

"""agent-custody-state-conformance: the shared test suite every plugin runs.

Subclass one class per plugin and provide its fixtures::

    from agent_custody_state_conformance import PluginHygiene, StoreConformance

- ``EventBackendConformance``: every SPEC section 2 rule, persistence, reopen and a
  property-based comparison with the in-memory reference backend.
- ``MultiProcessConformance``: an event backend shared by several processes.
- ``StoreConformance``: the write-through store rules, with a backdoor read.
- ``PluginHygiene``: the entry point resolves, imports cheaply, names are unique.

Each test carries a rule id (``@rule("EB-2.1-2")``) and a troubleshooting docstring; the rules are
listed in ``docs/conformance.md``. A subclass may deviate from a rule only by overriding its test
with a visible ``@pytest.mark.xfail(reason=...)``; any other override fails at collection.

Generic helpers live in submodules: ``gateway`` (an MCP client that calls the memory server as the
receipts gateway does), ``postgres`` (an embedded PostgreSQL server and its fixtures),
``fakeserver`` (the base of loopback fakes of vendor REST APIs), ``embeddings`` (deterministic
embedders), ``masking`` (a store's settings model shows no password), ``clock``.

This package is imported by pytest at startup wherever it is installed (its pytest plugin lives
here), so the suite classes are imported on first use, not with the package: ``import
agent_custody_state_conformance`` loads neither the core nor Hypothesis nor any database driver.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .rules import ConformanceSuite, rule

if TYPE_CHECKING:
    from .backends import EventBackendConformance
    from .hygiene import PluginHygiene
    from .multiprocess import MultiProcessConformance
    from .stores import StoreConformance

__all__ = [
    "ConformanceSuite",
    "EventBackendConformance",
    "MultiProcessConformance",
    "PluginHygiene",
    "StoreConformance",
    "rule",
]

# Suite class -> the submodule defining it, imported on first access (PEP 562).
_SUITES = {
    "EventBackendConformance": "backends",
    "MultiProcessConformance": "multiprocess",
    "PluginHygiene": "hygiene",
    "StoreConformance": "stores",
}


def __getattr__(name: str) -> Any:
    module = _SUITES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_SUITES})

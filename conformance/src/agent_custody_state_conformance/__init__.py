"""agent-custody-state-conformance: the shared test suite every plugin runs.

Subclass one class per plugin and provide its fixtures:

- ``EventBackendConformance`` (``backends``): every SPEC section 2 rule, persistence, reopen and a
  property-based comparison with the in-memory reference backend.
- ``PluginHygiene`` (``hygiene``): the entry point resolves, imports cheaply, names are unique.
- ``StoreConformance`` (``stores``): the write-through store rules, with a backdoor read.

Each test carries a rule id (``@rule("EB-2.1-2")``) and a troubleshooting docstring; the rules are
listed in ``docs/conformance.md``. A subclass may deviate from a rule only by overriding its test
with a visible ``@pytest.mark.xfail(reason=...)``; any other override fails at collection.
"""

from __future__ import annotations

from .rules import ConformanceSuite, rule

__all__ = ["ConformanceSuite", "rule"]

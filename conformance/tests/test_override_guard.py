"""The override guard covers every rule of every suite, whichever module of the suite defines it.

A subclass that replaces a rule's test without ``@pytest.mark.xfail(reason=...)`` fails when the
class is defined; with the mark it is accepted (and shows in every report). The suites are split
into rule groups (``backends/*``, ``stores/*``, ``property``), so each group is checked here.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent_custody_state_conformance import (
    ConformanceSuite,
    EventBackendConformance,
    MultiProcessConformance,
    PluginHygiene,
    StoreConformance,
)
from agent_custody_state_conformance.catalog import rules
from agent_custody_state_conformance.rules import RULE_ATTR

SUITES: list[type[ConformanceSuite]] = [
    EventBackendConformance,
    MultiProcessConformance,
    StoreConformance,
    PluginHygiene,
]


def _rule_tests(suite: type) -> list[tuple[str, str]]:
    """``(test name, defining module)`` for every rule test of ``suite``."""
    found = {}
    for klass in reversed(suite.__mro__):
        for name, value in vars(klass).items():
            if name.startswith("test_") and hasattr(value, RULE_ATTR):
                found[name] = klass.__module__
    return sorted(found.items())


CASES = [(suite, name) for suite in SUITES for name, _ in _rule_tests(suite)]


def test_every_rule_group_is_covered() -> None:
    modules = {module for suite in SUITES for _, module in _rule_tests(suite)}
    assert modules == {
        "agent_custody_state_conformance.backends.asserts",
        "agent_custody_state_conformance.backends.reads",
        "agent_custody_state_conformance.backends.mutations",
        "agent_custody_state_conformance.backends.persistence",
        "agent_custody_state_conformance.backends.questions",
        "agent_custody_state_conformance.backends.shred",
        "agent_custody_state_conformance.backends.shredmode",
        "agent_custody_state_conformance.backends.chain",
        "agent_custody_state_conformance.backends.certificates",
        "agent_custody_state_conformance.property",
        "agent_custody_state_conformance.multiprocess",
        "agent_custody_state_conformance.stores.writes",
        "agent_custody_state_conformance.stores.removal",
        "agent_custody_state_conformance.stores.verification",
        "agent_custody_state_conformance.stores.orphans",
        "agent_custody_state_conformance.stores.late",
        "agent_custody_state_conformance.hygiene",
    }
    # Every rule the catalogue (docs/conformance.md) lists is one of these tests.
    assert {name for _, _, name, _, _ in rules()} == {name for _, name in CASES}


@pytest.mark.parametrize(("suite", "name"), CASES, ids=[f"{s.__name__}.{n}" for s, n in CASES])
def test_a_plain_override_is_refused(suite: type, name: str) -> None:
    def replacement(self: Any, *args: Any, **kwargs: Any) -> None:
        return None

    rule_id = getattr(getattr(suite, name), RULE_ATTR)
    with pytest.raises(TypeError, match=f"overrides conformance rule {rule_id};"):
        type("Weakened", (suite,), {name: replacement})


@pytest.mark.parametrize(("suite", "name"), CASES, ids=[f"{s.__name__}.{n}" for s, n in CASES])
def test_an_xfail_override_is_accepted(suite: type, name: str) -> None:
    @pytest.mark.xfail(reason="the vendor cannot do this", strict=True)
    def replacement(self: Any, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("deviates")

    deviating = type("Deviating", (suite,), {name: replacement})
    assert deviating.__dict__[name] is replacement


def test_a_skip_or_none_is_refused() -> None:
    with pytest.raises(TypeError):
        type(
            "Skipping",
            (StoreConformance,),
            {"test_put_text": pytest.mark.skip(reason="no")(lambda self: None)},
        )
    with pytest.raises(TypeError):
        type("Nothing", (EventBackendConformance,), {"test_reopen": None})

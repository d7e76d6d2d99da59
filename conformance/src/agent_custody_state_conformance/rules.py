"""Rule ids and the guard that keeps a plugin from silently weakening the suite.

``ConformanceSuite.__init_subclass__`` looks at every ``test_*`` the suite defines: a subclass that
replaces one must mark the replacement ``@pytest.mark.xfail(reason=...)`` so the deviation shows
in every test report. Replacing a test with anything else (a passing body, ``None``, a skip)
raises ``TypeError`` when the subclass is defined.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pytest

F = TypeVar("F", bound=Callable[..., Any])

RULE_ATTR = "__conformance_rule__"


def rule(rule_id: str) -> Callable[[F], F]:
    """Tag a conformance test with its rule id (shown in reports as a ``conformance_rule`` mark)."""

    def mark(func: F) -> F:
        setattr(func, RULE_ATTR, rule_id)
        return pytest.mark.conformance_rule(rule_id)(func)  # type: ignore[no-any-return]

    return mark


def _is_xfail(obj: Any) -> bool:
    marks = getattr(obj, "pytestmark", [])
    return any(getattr(m, "name", None) == "xfail" and m.kwargs.get("reason") for m in marks)


class ConformanceSuite:
    """Base of every conformance class; see the module docstring for the override guard."""

    #: set on each class that defines rules (a suite, or one group of a suite's rules): the
    #: ``test_*`` it defines are protected in every subclass
    __suite_root__: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("__suite_root__"):
            return
        protected: dict[str, Any] = {}
        for base in reversed(cls.__mro__[1:]):
            if base.__dict__.get("__suite_root__"):
                for name, value in base.__dict__.items():
                    if name.startswith("test_"):
                        protected[name] = value
        for name, original in protected.items():
            if name not in cls.__dict__:
                continue
            replacement = cls.__dict__[name]
            if replacement is original:
                continue
            if not _is_xfail(replacement):
                rule_id = getattr(original, RULE_ATTR, "?")
                raise TypeError(
                    f"{cls.__name__}.{name} overrides conformance rule {rule_id}; a plugin may "
                    "deviate only with @pytest.mark.xfail(reason=...) on the override"
                )

"""``frozen_init``: the model's faster constructors behave as the dataclass-generated ones."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest

from agent_custody_state.ledger.frozen import frozen_init
from agent_custody_state.ledger.model import (
    AssertEvent,
    ConfirmEvent,
    Fact,
    ForgetEvent,
    Forgotten,
    HoldEvent,
    ReleaseEvent,
    RetractEvent,
    Source,
)
from agent_custody_state.ledger.requests import AssertRequest

MODEL = (Fact, Source, Forgotten, AssertEvent, RetractEvent, HoldEvent, ReleaseEvent)
MODEL += (ConfirmEvent, ForgetEvent, AssertRequest)


def _generated(cls: type) -> Any:
    """The dataclass-generated ``__init__`` of ``cls``: a class with the same fields made again
    without ``frozen_init``."""
    namespace: dict[str, Any] = {"__module__": cls.__module__, "__annotations__": {}}
    for f in dataclasses.fields(cls):
        namespace["__annotations__"][f.name] = f.type
        keep = {"init": f.init, "repr": f.repr, "compare": f.compare}
        if f.default is not dataclasses.MISSING:
            namespace[f.name] = field(default=f.default, **keep)
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f.name] = field(default_factory=f.default_factory, **keep)
    return dataclass(frozen=True, slots=True)(type(cls.__name__, (), namespace)).__init__


@pytest.mark.parametrize("cls", MODEL, ids=lambda c: c.__name__)
def test_the_signature_is_the_dataclass_one(cls: type) -> None:
    ours, theirs = inspect.signature(cls.__init__), inspect.signature(_generated(cls))
    assert list(ours.parameters) == list(theirs.parameters)
    for name, param in theirs.parameters.items():
        mine = ours.parameters[name]
        assert mine.kind == param.kind, name
        if repr(param.default) == "<factory>":  # dataclasses' marker for a default factory
            assert mine.default is not inspect.Parameter.empty, name
        else:
            assert mine.default == param.default, name


def _fact(**changes: Any) -> Fact:
    return dataclasses.replace(Fact("f", "s", "p", {"v": 1}, "org", "a"), **changes)


def test_defaults_and_factories_are_per_instance() -> None:
    one, two = Fact("f", "s", "p", 1, "org", "a"), Fact("g", "s", "p", 1, "org", "a")
    assert one.source == Source() and one.provenance == "claimed" and one.valid_from == ""
    assert one.external is None and one.valid_to is None and one.forgotten is None
    assert one.extra == {} and one.extra is not two.extra
    event = AssertEvent("e", "t", one)
    assert event.supersedes is None and event.extra == {} and event.line is None
    assert event.extra is not AssertEvent("e", "t", one).extra


def test_keywords_positions_replace_and_equality() -> None:
    by_keyword = Fact(
        fact_id="f", subject="s", predicate="p", value=[1], space="org", actor="a",
        source=Source("r"), provenance="verified", confidence=0.5, extra={"k": 1},
    )  # fmt: skip
    by_position = Fact("f", "s", "p", [1], "org", "a", Source("r"), "verified", None, "", None, 0.5)
    assert by_position == dataclasses.replace(by_keyword, extra={})
    assert dataclasses.replace(by_keyword, subject="t").subject == "t"
    assert _fact(confidence=1).confidence == 1
    with pytest.raises(TypeError):
        Fact("f", "s", "p", 1, "org")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Fact("f", "s", "p", 1, "org", "a", nope=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        AssertEvent("e", "t", _fact(), line="x")  # type: ignore[call-arg]


def test_still_frozen_and_copyable() -> None:
    fact = _fact(forgotten=Forgotten("d", "sha256", "t"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        fact.subject = "x"  # type: ignore[misc]
    event = RetractEvent("e", "t", "f", "a", "why", Source("r"))
    for thing in (fact, event, AssertEvent("e", "t", fact, "old", {"k": [1]})):
        assert pickle.loads(pickle.dumps(thing)) == thing
        assert copy.deepcopy(thing) == thing and copy.copy(thing) == thing
        assert repr(thing).startswith(type(thing).__name__ + "(")


def test_a_class_it_does_not_cover_is_refused() -> None:
    @dataclass(frozen=True)
    class Unslotted:
        a: int

    @dataclass(frozen=True, slots=True)
    class Posted:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclass(frozen=True, slots=True, kw_only=True)
    class KeywordOnly:
        a: int

    for cls in (Unslotted, Posted, KeywordOnly):
        with pytest.raises(TypeError, match="frozen_init"):
            frozen_init(cls)


def test_class_variables_are_not_parameters_and_uninitialised_fields_get_defaults() -> None:
    @frozen_init
    @dataclass(frozen=True, slots=True)
    class WithClassVar:
        a: int
        b: list[int] = field(default_factory=list)
        c: str = field(default="c", init=False)
        d: dict[str, int] = field(default_factory=dict, init=False)
        kind: ClassVar[str] = "k"

    made = WithClassVar(1)
    assert (made.a, made.b, made.c, made.d, WithClassVar.kind) == (1, [], "c", {}, "k")
    assert made.d is not WithClassVar(2).d
    assert list(inspect.signature(WithClassVar.__init__).parameters) == ["self", "a", "b"]

"""A faster ``__init__`` for the model's frozen, slotted dataclasses.

A frozen dataclass's generated ``__init__`` sets each field with ``object.__setattr__``, which
looks the attribute up on the type at every call: a ``Fact`` (14 fields) cost 1.5 us to build,
and every read decodes one per assert, every write builds one or two. ``frozen_init`` replaces
it with one that calls each slot's member descriptor directly (0.8 us for a ``Fact``), with the
same signature: the same parameters in the same order, the same defaults, default factories
called per instance, fields with ``init=False`` set to their default. Equality, ``repr``,
``replace``, pickling and the frozen ``__setattr__`` are the dataclass's own, untouched.

The new ``__init__`` is generated source, as ``dataclasses`` generates its own; it refuses a
class it does not cover (not slotted, a ``__post_init__``, keyword-only fields, an ``InitVar``)
rather than build a subtly different one.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

C = TypeVar("C", bound=type)

_MISSING = object()  # "not given": the parameter default of a field with a default factory


def frozen_init(cls: C) -> C:
    """Give the frozen, slotted dataclass ``cls`` the faster ``__init__`` (module docstring).
    Use it above ``@dataclass(frozen=True, slots=True)``."""
    params = dataclasses.fields(cls)
    if not hasattr(cls, "__slots__") or hasattr(cls, "__post_init__"):
        raise TypeError(f"frozen_init: {cls.__name__} must be slotted, with no __post_init__")
    names: dict[str, Any] = {"_MISSING": _MISSING}
    signature: list[str] = []
    body: list[str] = []
    for i, f in enumerate(params):
        if f.kw_only:
            raise TypeError(f"frozen_init: {cls.__name__}.{f.name} is keyword-only")
        names[f"_set{i}"] = getattr(cls, f.name).__set__  # the slot's member descriptor
        if f.default is not dataclasses.MISSING:
            names[f"_default{i}"] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            names[f"_factory{i}"] = f.default_factory
        if not f.init:
            if f.default is not dataclasses.MISSING:
                body.append(f"    _set{i}(self, _default{i})")
            elif f.default_factory is not dataclasses.MISSING:
                body.append(f"    _set{i}(self, _factory{i}())")
            else:  # the dataclass leaves such a slot unset: not a case worth covering
                raise TypeError(f"frozen_init: {cls.__name__}.{f.name} has no default")
        elif f.default is not dataclasses.MISSING:
            signature.append(f"{f.name}=_default{i}")
            body.append(f"    _set{i}(self, {f.name})")
        elif f.default_factory is not dataclasses.MISSING:
            signature.append(f"{f.name}=_MISSING")
            body.append(f"    _set{i}(self, _factory{i}() if {f.name} is _MISSING else {f.name})")
        else:
            signature.append(f.name)
            body.append(f"    _set{i}(self, {f.name})")
    source = f"def __init__(self, {', '.join(signature)}):\n" + "\n".join(body) + "\n"
    exec(source, names)  # our own generated source, as dataclasses generates its own
    init = names["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init  # type: ignore[misc]
    return cls

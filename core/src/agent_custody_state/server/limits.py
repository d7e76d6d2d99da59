"""How big a value may be, and keeping big JSON work off the event loop (issue 11 item 4).

One heavy request must not stall every other caller. Two things make a value expensive: its
element count (the JavaScript-compatible encoder spends microseconds on each number, several
times per write: the ledger line, the result, the digest) and its size. So:

- ``memory.write`` refuses a value with more than ``max_value_elements`` elements (array items
  and object members, at any depth: ``[1, [2, 3]]`` has four, a scalar none) or more than
  ``max_value_bytes`` bytes as compact JSON, with a refusal naming the limit, before the ledger
  or any store sees it;
- measuring a value stops as soon as it passes a limit (a 900,000-element array costs one
  ``len``), and a value still being measured after ``INLINE_STEPS`` elements is finished on a
  worker thread, where the interpreter lets the event loop run between bytecodes;
- a result larger than ``INLINE_RENDER`` elements or bytes is encoded on a worker thread too;
- ``memory.write`` refuses a value nested more than ``max_depth`` (128) levels deep
  (``invalid arguments: value: ...``): the results that carry a value nest it about six levels
  deeper, and the official Python client refuses JSON nested 200 levels deep, so a deeper
  value, once accepted, would break every read that returns it (docs/security.md).

The byte count is the compact JSON size with escapes aside (a string counts its UTF-8 bytes
and two quotes; a number its decimal digits): close enough to bound the work, and cheap.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio

from agent_custody_state.canonical import js_json
from agent_custody_state.ledger.errors import LedgerError

DEFAULT_MAX_VALUE_ELEMENTS = 10_000
DEFAULT_MAX_VALUE_BYTES = 1024 * 1024
#: Levels of arrays and objects a written value may nest (``[]`` is one, ``[[]]`` two).
DEFAULT_MAX_VALUE_DEPTH = 128
#: Elements a measurement may look at on the event loop before moving to a worker thread.
INLINE_STEPS = 2_000
#: A result past this many elements (or bytes) is encoded on a worker thread.
INLINE_RENDER = 2_000
INLINE_RENDER_BYTES = 256 * 1024


@dataclass(frozen=True)
class ValueLimits:
    """``max_value_elements`` and ``max_value_bytes`` (``[server]`` in the config file), and
    the deepest nesting (``max_depth``, not a setting: see the module docstring)."""

    max_elements: int = DEFAULT_MAX_VALUE_ELEMENTS
    max_bytes: int = DEFAULT_MAX_VALUE_BYTES
    max_depth: int = DEFAULT_MAX_VALUE_DEPTH

    def __post_init__(self) -> None:
        if self.max_elements < 1 or self.max_bytes < 1 or self.max_depth < 1:
            raise ValueError("max_value_elements and max_value_bytes must be positive")


def _text_bytes(text: str) -> int:
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def _number_bytes(number: int | float) -> int:
    if isinstance(number, float):
        return len(repr(number))
    if -(10**18) < number < 10**18:
        return len(str(number))
    # str() of a huge integer is slow (and refused past 4300 digits): estimate from the bits.
    return int(number.bit_length() * 0.30103) + 2


class JsonSize:
    """Counts a decoded JSON value's elements and compact-JSON bytes, stopping past a limit.

    ``walk(steps)`` looks at up to ``steps`` more elements (all, when None) and returns whether
    the measurement is finished; it can be called again to go on, from another thread.
    """

    def __init__(self, value: Any, max_elements: int, max_bytes: int) -> None:
        self.max_elements, self.max_bytes = max_elements, max_bytes
        self.elements = 0
        self.bytes = 0
        self._stack: list[Any] = [value]

    @property
    def over(self) -> bool:
        return self.elements > self.max_elements or self.bytes > self.max_bytes

    def walk(self, steps: int | None = None) -> bool:
        stack = self._stack
        budget = steps if steps is not None else -1
        while stack:
            if budget == 0:
                return False
            item = stack.pop()
            budget -= 1
            kind = type(item)  # exact types first: decoded JSON is made of them (and it is hot)
            if kind is str:
                self.bytes += (len(item) if item.isascii() else _text_bytes(item)) + 2
            elif item is None or item is True or item is False:
                self.bytes += 5 if item is False else 4
            elif kind is not dict and kind is not list and isinstance(item, str):
                self.bytes += _text_bytes(item) + 2
            elif kind is not dict and kind is not list and isinstance(item, int | float):
                self.bytes += _number_bytes(item)
            elif kind is dict or kind is list or isinstance(item, list | tuple | Mapping):
                # Counted before anything is pushed: an oversized container costs one len().
                self.elements += len(item)
                self.bytes += 1 + max(len(item), 1)  # brackets and commas
                if self.over:
                    break
                if kind is dict or isinstance(item, Mapping):
                    for key, child in item.items():
                        self.bytes += (_text_bytes(key) if isinstance(key, str) else 8) + 3
                        stack.append(child)
                else:
                    stack.extend(item)
                budget = max(budget - len(item), 0) if steps is not None else -1
            if self.over:
                break
        stack.clear()
        return True


async def measure(
    value: Any, max_elements: int, max_bytes: int, inline_steps: int = INLINE_STEPS
) -> JsonSize:
    """Measure ``value`` (up to just past the limits), on a worker thread once it is big."""
    size = JsonSize(value, max_elements, max_bytes)
    if not size.walk(inline_steps):
        await anyio.to_thread.run_sync(size.walk)
    return size


async def check_value(value: Any, limits: ValueLimits) -> None:
    """Refuse a value over the limits (``LedgerError`` on ``value``, naming the limit)."""
    size = await measure(value, limits.max_elements, limits.max_bytes)
    if size.elements > limits.max_elements:
        raise LedgerError(
            f"value too large: more than {limits.max_elements} elements (array items and object "
            f"members, at any depth); the limit is max_value_elements = {limits.max_elements}",
            field="value",
        )
    if size.bytes > limits.max_bytes:
        raise LedgerError(
            f"value too large: more than {limits.max_bytes} bytes as JSON; the limit is "
            f"max_value_bytes = {limits.max_bytes}",
            field="value",
        )


def too_deep(value: Any, max_depth: int) -> bool:
    """Whether ``value`` nests arrays and objects more than ``max_depth`` levels (iteratively:
    only containers are visited, and a value reaching here has passed the element limit)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        members = item.values() if isinstance(item, Mapping) else item
        for member in members:
            if isinstance(member, list | tuple | Mapping):
                if depth >= max_depth:
                    return True
                stack.append((member, depth + 1))
    return False


def depth_problem(value: Any, max_depth: int) -> str | None:
    """The refusal of a value nested too deeply (``value: ...``), or None."""
    if not isinstance(value, list | tuple | Mapping) or not too_deep(value, max_depth):
        return None
    return (
        f"value: nested too deeply: more than {max_depth} levels of arrays and objects; the "
        "results that return a value must stay readable by every MCP client"
    )


async def render_json(data: Any) -> str:
    """``js_json(data)``, on a worker thread when ``data`` is big."""
    size = JsonSize(data, INLINE_RENDER, INLINE_RENDER_BYTES)
    if size.walk(INLINE_RENDER) and not size.over:
        return js_json(data)
    return await anyio.to_thread.run_sync(js_json, data)

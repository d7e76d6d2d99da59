"""``SpaceScope``: the spaces one caller may use, as exact names and ``prefix*`` patterns.

A value with no dependencies, so the configuration can validate patterns with the same parser
the server applies (``server/scopes.py`` holds what the server does with it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SpaceScope:
    """The spaces one caller may touch: exact names and ``prefix*`` patterns."""

    patterns: tuple[str, ...]

    @classmethod
    def parse(cls, patterns: Iterable[str], *, what: str = "spaces") -> SpaceScope:
        """Validate ``patterns`` (``ValueError`` naming ``what``): non-empty strings, ``*``
        only at the end, at least one pattern (an empty list would be a token that can do
        nothing, most likely a mistake)."""
        if isinstance(patterns, str):
            raise ValueError(f"{what}: a list of space names or prefixes, not one string")
        out: list[str] = []
        for pattern in patterns:
            if not isinstance(pattern, str) or not pattern.strip():
                raise ValueError(f"{what}: every entry must be a non-empty space name or prefix")
            if "*" in pattern[:-1]:
                raise ValueError(
                    f"{what}: {pattern!r}: '*' may only end a pattern (a prefix), as in 'user:*'"
                )
            out.append(pattern)
        if not out:
            raise ValueError(f"{what}: give at least one space or prefix (or leave it unset)")
        return cls(tuple(dict.fromkeys(out)))

    def allows(self, space: str) -> bool:
        for pattern in self.patterns:
            if pattern.endswith("*"):
                if space.startswith(pattern[:-1]):
                    return True
            elif space == pattern:
                return True
        return False

    def __str__(self) -> str:
        return ", ".join(self.patterns)

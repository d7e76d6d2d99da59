"""Checks on the configured bearer tokens as a set, made once at startup (``normalize_tokens``).

Two tokens holding the same value but a different role or space scope (two variables set to
one secret by a copy-paste, or one variable named for two roles) would make the guard pick one
of them by their order, silently: a reader token could be a gateway. That is refused, naming
the tokens by their labels (their variables), never by value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_custody_state.server.guard import BearerToken


def check_distinct(tokens: Sequence[BearerToken]) -> None:
    """``ValueError`` when two tokens share a value but not their role and spaces."""
    seen: dict[str, BearerToken] = {}
    for token in tokens:
        earlier = seen.setdefault(token.value, token)
        if earlier is not token and (earlier.role, earlier.spaces) != (token.role, token.spaces):
            raise ValueError(
                f"bearer tokens {earlier.label} ({earlier.role}) and {token.label} "
                f"({token.role}) hold the same value but grant different access; give each "
                "role its own token"
            )

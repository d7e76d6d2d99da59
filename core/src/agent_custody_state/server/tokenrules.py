"""Checks on the configured bearer tokens, made once at startup (``normalize_tokens``, and
``open_runtime`` before the ledger is opened).

A static token is a password that never expires and is compared on every request: one of a few
characters can be guessed, so a token shorter than ``MIN_TOKEN_LENGTH`` characters stops the
server, naming the token by its label or variable and role, never by value.

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

#: Fewest characters a static bearer token may have (128 bits as 32 hex digits is twice that).
MIN_TOKEN_LENGTH = 16


def check_tokens(tokens: Sequence[BearerToken]) -> None:
    """``ValueError`` for a token too short, or two sharing a value but not their access."""
    for token in tokens:
        check_length(token.value, f"bearer token {token.label} (role {token.role})")
    check_distinct(tokens)


def check_length(value: str, what: str) -> None:
    """``ValueError`` naming ``what`` when ``value`` is shorter than ``MIN_TOKEN_LENGTH``."""
    if len(value) < MIN_TOKEN_LENGTH:
        size = f"{len(value)} character{'' if len(value) == 1 else 's'}"
        raise ValueError(
            f"{what} is too short: {size}, at least {MIN_TOKEN_LENGTH} are needed; make one "
            "with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )


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

"""The store suite's ``where`` rules (ST-6-where, ST-6-where-moves) catch what they must.

Run directly on in-process stores that declare ``where``: a text leaking a credential the store
read, URL userinfo or a query fails; a store built for another container with the same text
fails; a clean pair passes; a store declaring nothing is skipped.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from agent_custody_state.stores.base import register_secret
from agent_custody_state.stores.inprocess import InProcessStore
from agent_custody_state_conformance.stores import StoreConformance

SECRET = "sk-where-rule-0123456789"


class Placed(InProcessStore):
    def __init__(self, where: str | None) -> None:
        super().__init__("placed")
        if where is not None:
            self.where = where


Suite: Any = type("Suite", (StoreConformance,), {"capabilities": frozenset({"relocate"})})


def secret_free(store: Placed) -> None:
    anyio.run(Suite().test_where_names_no_secret, store)


class Request:
    """Hands the rule its ``relocated_store`` as pytest's fixture request would."""

    def __init__(self, relocated: Placed) -> None:
        self.relocated = relocated

    def getfixturevalue(self, name: str) -> Placed:
        assert name == "relocated_store"
        return self.relocated


def moves(store: Placed, relocated: Placed) -> None:
    anyio.run(Suite().test_another_container_gives_another_where, store, Request(relocated))


@pytest.mark.parametrize(
    "where",
    [
        f"https://api.example.com graph:g key:{SECRET}",
        "postgresql://bob:hunter2@db:5432/app table:t",
        "https://bob@api.example.com graph:g",
        "https://api.example.com/?token=abc graph:g",
        "two\nlines",
        "",
    ],
)
def test_a_where_with_a_secret_or_not_a_line_fails(where: str) -> None:
    register_secret(SECRET)
    with pytest.raises(AssertionError):
        secret_free(Placed(where))


def test_a_clean_where_passes_and_none_is_skipped() -> None:
    secret_free(Placed("https://api.example.com graph:support"))
    with pytest.raises(pytest.skip.Exception):
        secret_free(Placed(None))


def test_another_container_must_give_another_where() -> None:
    moves(Placed("postgresql://db:5432/app table:a"), Placed("postgresql://db:5432/app table:b"))
    with pytest.raises(AssertionError, match="same where"):
        moves(Placed("mem://a"), Placed("mem://a"))
    with pytest.raises(AssertionError):
        moves(Placed("mem://a"), Placed(f"mem://b {SECRET}"))


def test_without_the_capability_the_move_rule_is_skipped() -> None:
    plain: Any = type("Plain", (StoreConformance,), {"capabilities": frozenset()})
    with pytest.raises(pytest.skip.Exception):
        anyio.run(
            plain().test_another_container_gives_another_where, Placed("a"), Request(Placed("b"))
        )

"""Twentieth review, part 2: a Letta store's ``repr`` shows no password of its server's URL."""

from __future__ import annotations

from letta_client import Letta

from agent_custody_state_letta.store import LettaStore


def test_the_repr_shows_no_userinfo() -> None:
    client = Letta(base_url="https://svc:pw-7Qx2Lm9Rk@letta.internal:8283", api_key="k")
    store = LettaStore("letta", client, "agent-1")
    assert repr(store) == "<LettaStore letta agent=agent-1 at https://letta.internal:8283>"

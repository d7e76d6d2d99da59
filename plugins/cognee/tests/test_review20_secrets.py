"""Twentieth review, part 2: a Cognee store's ``repr`` shows no password of its URL."""

from __future__ import annotations

from agent_custody_state_cognee.store import CogneeStore


def test_the_repr_shows_no_userinfo_or_query() -> None:
    store = CogneeStore(
        "cognee", "https://svc:pw-7Qx2Lm9Rk@cognee.internal:8000/?token=t0k3n", dataset_name="d"
    )
    assert repr(store) == "<CogneeStore cognee dataset=d at https://cognee.internal:8000>"

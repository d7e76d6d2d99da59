"""Twentieth review, last part: Cognee's settings show no password (``url`` with userinfo) in
their ``repr`` or ``str``, nor in the refusal of a table."""

from __future__ import annotations

from agent_custody_state_cognee.settings import CogneeSettings
from agent_custody_state_conformance.masking import assert_masked, assert_refused_quietly

PASSWORD = "Cognee-Proxy-Pass-7731"
URL = f"http://u:{PASSWORD}@cognee.example:8000"


def test_the_settings_repr_masks_the_url_password() -> None:
    assert_masked(CogneeSettings(url=URL, dataset_name="custody"), PASSWORD)


def test_a_refused_table_is_not_quoted() -> None:
    # pydantic quotes up to 50 characters of the input: a short table's in full
    assert_refused_quietly(CogneeSettings, {"url": "http://u:pw7731@cognee"}, "pw7731")

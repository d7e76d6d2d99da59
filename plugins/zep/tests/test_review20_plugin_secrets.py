"""Twentieth review, last part: Zep's settings show no password (``base_url`` with userinfo) in
their ``repr`` or ``str``, nor in the refusal of a table."""

from __future__ import annotations

from agent_custody_state_conformance.masking import assert_masked, assert_refused_quietly
from agent_custody_state_zep.settings import ZepSettings

PASSWORD = "Zep-Proxy-Pass-7731"


def test_the_settings_repr_masks_the_base_url_password() -> None:
    assert_masked(ZepSettings(base_url=f"https://u:{PASSWORD}@zep.example", user_id="x"), PASSWORD)


def test_a_refused_table_is_not_quoted() -> None:
    # pydantic quotes up to 50 characters of the input: a short table's in full
    table = {"base_url": "https://u:pw7731@zep.example"}  # no graph chosen
    assert_refused_quietly(ZepSettings, table, "pw7731")

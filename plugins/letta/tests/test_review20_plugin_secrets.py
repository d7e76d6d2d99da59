"""Twentieth review, last part: Letta's settings show no password (``base_url`` with userinfo)
in their ``repr`` or ``str``, nor in the refusal of a table."""

from __future__ import annotations

from agent_custody_state_conformance.masking import assert_masked, assert_refused_quietly
from agent_custody_state_letta.settings import LettaSettings

PASSWORD = "Letta-Proxy-Pass-7731"
AGENT = "agent-00000000-0000-4000-8000-000000000000"


def test_the_settings_repr_masks_the_base_url_password() -> None:
    settings = LettaSettings(agent_id=AGENT, base_url=f"http://u:{PASSWORD}@localhost:8283")
    assert_masked(settings, PASSWORD)


def test_a_refused_table_is_not_quoted() -> None:
    # pydantic quotes up to 50 characters of the input: a short table's in full
    table = {"base_url": "https://u:pw7731@letta.example"}  # no agent_id
    assert_refused_quietly(LettaSettings, table, "pw7731")

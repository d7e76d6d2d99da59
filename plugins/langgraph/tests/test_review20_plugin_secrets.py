"""Twentieth review, last part: LangGraph's settings show no password in their ``repr`` or
``str``, nor in the refusal of a table. The URL itself is read from ``dsn_env``; what the table
holds is shown masked all the same (a connection string given as ``path`` by mistake)."""

from __future__ import annotations

from agent_custody_state_conformance.masking import assert_masked, assert_refused_quietly
from agent_custody_state_langgraph.settings import LangGraphSettings

PASSWORD = "LangGraph-Pass-7731"
DSN = f"postgresql://u:{PASSWORD}@db.example/app"


def test_the_settings_repr_masks_a_url_password() -> None:
    assert_masked(LangGraphSettings(backend="sqlite", path=DSN), PASSWORD)


def test_a_refused_table_is_not_quoted() -> None:
    # path is only for sqlite: a model-level refusal, quoting up to 50 characters of the table
    assert_refused_quietly(LangGraphSettings, {"path": "pg://u:pw7731@db"}, "pw7731")

"""Twentieth review, last part: pgvector's settings show no password. A ``dsn`` holding one is
refused (name the variable holding the URL in ``dsn_env``): the refusal does not quote it, and
settings made without validation (``model_construct``) still show it masked."""

from __future__ import annotations

from agent_custody_state_conformance.masking import assert_masked, assert_refused_quietly
from agent_custody_state_pgvector.settings import PgvectorSettings

PASSWORD = "Pgvector-Pass-7731"
DSN = f"postgresql://u:{PASSWORD}@db.example/app"


def test_a_dsn_with_a_password_is_refused_without_quoting_it() -> None:
    table = {"dsn": DSN, "dimensions": 3, "embed": "m:embed"}
    assert_refused_quietly(PgvectorSettings, table, PASSWORD)


def test_the_settings_repr_masks_a_url_password() -> None:
    assert_masked(PgvectorSettings.model_construct(dsn=DSN, dimensions=3, embed="m:e"), PASSWORD)

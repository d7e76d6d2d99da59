"""Credentials read for a store never appear in its errors (``stores.base.register_secret``)."""

from __future__ import annotations

import pytest

from agent_custody_state.stores import StoreError
from agent_custody_state.stores.base import error_message
from agent_custody_state.stores.kit import secret_from_env


def test_secrets_from_the_environment_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACS_TEST_KEY", "key-9d1f0c77ab")
    monkeypatch.setenv("ACS_TEST_DSN", "host=db user=u password='pw 8h%q;x' dbname=f")
    monkeypatch.setenv("ACS_TEST_URL", "postgresql://u:p%40ss%zzword@db/f")
    for variable in ("ACS_TEST_KEY", "ACS_TEST_DSN", "ACS_TEST_URL"):
        secret_from_env("s", variable)
    error = StoreError("s", '401 for key-9d1f0c77ab; bad token "p%40ss%zzword" (p@ss%zzword)')
    assert "9d1f0c77ab" not in str(error) and "zzword" not in error.message
    assert error.message.startswith("401 for ***;")
    assert "8h%q" not in error_message(ValueError('near "pw 8h%q;x" in the string'))

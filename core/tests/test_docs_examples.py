"""Every example in the user documentation runs, so a copied block works.

The pages are ``README.md`` and ``docs/*.md`` but the records (``decisions.md``,
``performance.md``) and the generated pages (``conformance.md`` has no code; ``hooks.md`` is
written by ``tests/hookdoc.py`` from the hook specifications, and its blocks are signatures).

- Each ```` ```python ```` block runs, the blocks of one page in their order, sharing one
  namespace and one temporary working directory (a page's blocks build on each other), exactly
  as written: a block that is not a valid script (a top-level ``await``) fails.
- Each ```` ```toml ```` block that is a memory server configuration is loaded with
  ``load_config`` from a ``memory.toml`` and must be accepted; a ``pyproject.toml`` fragment
  (an entry point) must parse.
- A shell block (```` ```sh ````, ```` ```console ````, ```` ```bash ````) runs only when opted in
  with ``<!-- run -->``: each ``agent-custody-memory`` command in it (``$ `` prompts and output
  lines of a console block are told apart) must exit 0, run in-process in the page's working
  directory (after the page's Python blocks above it).

HTML comments on the lines right before a fence steer it:

- ``<!-- not run: REASON -->``: reported as skipped with REASON (a vendor account, a network,
  PostgreSQL, a sketch that is not a program);
- ``<!-- needs: sqlite, port 8790 -->``: runs where that is at hand, else skipped naming it
  (``REQUIREMENTS``; the core CI session has no SQLite plugin);
- ``<!-- first: agent-custody-memory ... -->``: a command run before the block, for what its
  prose asks the reader to have done (``keygen --out memory.key``).

The environment the pages assume (``FORGET_KEY``, ``MEMORY_TOKEN``) is set for every block.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import socket
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state.cli import main
from agent_custody_state.config import MemoryConfig, load_config
from agent_custody_state.plugins import get_plugin_manager

ROOT = Path(__file__).resolve().parents[2]
#: Pages that are records, or generated (markers there would be lost on regeneration).
NOT_USER_PAGES = {"decisions.md", "performance.md", "conformance.md"}
GENERATED = {"hooks.md": "generated from hookspecs.py by tests/hookdoc.py: hook signatures"}
PAGES = [
    ROOT / "README.md",
    *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name not in NOT_USER_PAGES),
]
SHELL = {"sh", "console", "bash", "shell"}
FENCE = re.compile(r"^(`{3,})\s*([\w-]*)")
COMMENT = re.compile(r"^<!--.*-->$")
MARKER = re.compile(r"^<!--\s*(not run|needs|first|run)\s*(?::\s*(.*?))?\s*-->$")
#: A TOML block holding one of these tables is a ``pyproject.toml`` fragment.
PYPROJECT = {"project", "tool", "build-system", "dependency-groups"}
COMMAND = "agent-custody-memory"


def _port_free(port: int) -> str | None:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return f"port {port} is in use here"
    return None


#: What ``<!-- needs: ... -->`` may name: each answers None (at hand) or why it is not.
REQUIREMENTS: dict[str, Callable[[], str | None]] = {
    "sqlite": lambda: (
        None
        if "sqlite" in get_plugin_manager().backends
        else "needs the SQLite plugin (agent-custody-state-events-sqlite), not loaded here"
    ),
    "port 8790": lambda: _port_free(8790),
}


@dataclass
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    source: str
    markers: dict[str, list[str]] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path, text: str | None = None) -> list[Block]:
    """The fenced blocks of ``page`` (or of ``text``, as if it were the page's), each with the
    HTML comments right above its fence."""
    lines = (page.read_text(encoding="utf-8") if text is None else text).splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        close = next(
            (j for j in range(index + 1, len(lines)) if lines[j].strip() == opening.group(1)),
            len(lines),
        )
        markers: dict[str, list[str]] = {}
        above = index - 1
        while above >= 0 and COMMENT.match(lines[above].strip()):
            if hit := MARKER.match(lines[above].strip()):  # others: <!-- tested: ... -->
                markers.setdefault(hit.group(1), []).insert(0, hit.group(2) or "")
            above -= 1
        source = "\n".join(lines[index + 1 : close]) + "\n"
        found.append(Block(page, index + 1, opening.group(2).lower(), source, markers))
        index = close + 1
    return found


def _skip_reason(block: Block) -> str | None:
    if block.page.name in GENERATED:
        return GENERATED[block.page.name]
    if "not run" in block.markers:
        return "; ".join(block.markers["not run"]) or "marked not run"
    for needed in ", ".join(block.markers.get("needs", [])).split(","):
        if needed.strip():
            if needed.strip() not in REQUIREMENTS:
                raise AssertionError(f"{needed.strip()!r}: not one of {sorted(REQUIREMENTS)}")
            if why := REQUIREMENTS[needed.strip()]():
                return why
    return None


def _params() -> list[Any]:
    """Every block the test runs, page by page in the pages' order (a shell block only when
    opted in), each skipped with its reason where it is not run here."""
    params = []
    for page in PAGES:
        for block in blocks(page):
            if block.lang not in {"python", "toml"} and not (
                block.lang in SHELL and "run" in block.markers
            ):
                continue
            marks = []
            if (reason := _skip_reason(block)) is not None:
                marks.append(pytest.mark.skip(reason=reason))
            params.append(pytest.param(block, id=block.where, marks=marks))
    return params


@dataclass
class PageRun:
    folder: Path
    namespace: dict[str, Any]


_RUNS: dict[Path, PageRun] = {}


@pytest.fixture
def page_run(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Callable[[Block], PageRun]:
    """The working directory and namespace of a block's page (made on its first block), with
    the page's environment; the directory is the current one while the block runs."""
    monkeypatch.setenv("FORGET_KEY", "docs-example-forget-key")
    monkeypatch.setenv("MEMORY_TOKEN", "docs-example-token-0123456789abcdef")

    def enter(block: Block) -> PageRun:
        run = _RUNS.get(block.page)
        if run is None:
            folder = tmp_path_factory.mktemp(block.page.stem)
            run = _RUNS[block.page] = PageRun(folder, {"__name__": "__main__"})
        monkeypatch.chdir(run.folder)
        return run

    return enter


def _command(words: list[str], where: str) -> None:
    """Run ``agent-custody-memory WORDS`` in-process; a non-zero exit fails naming it."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(words[1:])
        except SystemExit as exit_:  # argparse's own errors
            code = exit_.code if isinstance(exit_.code, int) else 1
    assert code == 0, f"{where}: {shlex.join(words)} exited {code}:\n{err.getvalue()}"


def _first(block: Block) -> None:
    for command in block.markers.get("first", []):
        words = shlex.split(command, comments=True)
        assert words[:1] == [COMMAND], f"{block.where}: first: runs only {COMMAND} commands"
        _command(words, f"{block.where} (first)")


def _run_python(block: Block, run: PageRun) -> None:
    code = compile(block.source, block.where, "exec")
    exec(code, run.namespace)  # the documentation's own example, as a reader runs it


def _load_toml(block: Block, folder: Path) -> None:
    try:
        parsed = tomllib.loads(block.source)
    except tomllib.TOMLDecodeError as exc:
        pytest.fail(f"{block.where}: not valid TOML: {exc}")
    if PYPROJECT & set(parsed):
        return  # a pyproject.toml fragment: parsing is all a reader does with it
    config = folder / f"memory-{block.line}.toml"
    config.write_text(block.source, encoding="utf-8")
    assert isinstance(load_config(config), MemoryConfig)


def _shell_commands(block: Block) -> list[list[str]]:
    """The ``agent-custody-memory`` commands of a shell block: backslash continuations joined;
    in a console block only ``$ `` lines (the rest is output)."""
    text = re.sub(r"\\\n\s*", " ", block.source)
    commands = []
    for line in text.splitlines():
        if block.lang == "console":
            if not line.startswith("$ "):
                continue
            line = line[2:]
        words = shlex.split(line, comments=True)
        if words[:1] == [COMMAND]:
            commands.append(words)
    return commands


def _run_shell(block: Block) -> None:
    commands = _shell_commands(block)
    assert commands, f"{block.where}: marked run but holds no {COMMAND} command"
    for words in commands:
        _command(words, block.where)


@pytest.mark.parametrize("block", _params())
def test_example_runs(block: Block, page_run: Callable[[Block], PageRun]) -> None:
    run = page_run(block)
    _first(block)
    if block.lang == "python":
        _run_python(block, run)
    elif block.lang == "toml":
        _load_toml(block, run.folder)
    else:
        _run_shell(block)


def test_markers_are_read() -> None:
    """The parser sees a marker stack and skips a marked block; a stray marker is noticed."""
    page = ROOT / "docs" / "example.md"
    text = (
        "<!-- not run: needs a Zep account -->\n```python\nraise SystemExit\n```\n"
        "<!-- needs: sqlite -->\n<!-- tested: elsewhere -->\n"
        "<!-- first: agent-custody-memory keygen --out k -->\n"
        "```python\nx = 1\n```\n"
    )
    found = blocks(page, text)
    assert [(b.line, b.lang) for b in found] == [(2, "python"), (8, "python")]
    assert _skip_reason(found[0]) == "needs a Zep account"
    assert found[1].markers == {
        "needs": ["sqlite"],
        "first": ["agent-custody-memory keygen --out k"],
    }
    found[1].markers["needs"] = ["sqllite"]
    with pytest.raises(AssertionError, match="sqllite"):
        _skip_reason(found[1])

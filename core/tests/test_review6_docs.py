"""Sixth review: the docs tell the truth, checked mechanically where that is robust.

- Every command of ``agent-custody-memory`` is in the table of ``docs/cli.md``, every flag of it
  is named where that command is documented (its ``docs/cli.md`` or ``docs/extras.md`` section;
  ``serve``'s flags may be in ``docs/configuration.md``), and every ``--flag`` a page writes
  after ``agent-custody-memory COMMAND`` is a flag of that command.
- Every key the configuration loader accepts is in ``docs/configuration.md``'s tables, every key
  those tables name is accepted, and every ``AGENT_CUSTODY_*`` variable the code reads is
  documented there.
- The README's Quickstart commands (``./dev demo``, ``./dev test``) and every ``./dev -s NAME``
  the docs mention exist.
- A ``--config`` that cannot be used (missing, a folder, unreadable, bad TOML, not UTF-8, an
  unknown key, a value of the wrong type) is one line naming the file (and the key), exit 1,
  nothing written; a folder was reported as "does not exist".
"""

from __future__ import annotations

import argparse
import os
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state.authconfig import OAuthConfig, OAuthGrantConfig, TokenConfig
from agent_custody_state.cli import build_parser, main
from agent_custody_state.config import (
    MemoryConfig,
    ServerConfig,
    StoreConfig,
    VerifyConfig,
    load_config,
)

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
#: The pages a user reads (``decisions.md`` keeps history, and may name what no longer exists).
PAGES = [
    ROOT / "README.md",
    ROOT / "CONTRIBUTING.md",
    *sorted(p for p in DOCS.glob("*.md") if p.name != "decisions.md"),
    *sorted((ROOT / "examples").rglob("*.md")),
]
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _leaf_commands() -> dict[str, argparse.ArgumentParser]:
    """``{"facts": parser, ..., "certificate verify": parser}``: every command a user runs."""

    def walk(parser: argparse.ArgumentParser, prefix: str) -> dict[str, argparse.ArgumentParser]:
        found: dict[str, argparse.ArgumentParser] = {}
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    inner = walk(sub, f"{prefix}{name} ")
                    found.update(inner or {f"{prefix}{name}": sub})
        return found

    return walk(build_parser(), "")


def _flags(parser: argparse.ArgumentParser, *, hidden: bool = False) -> set[str]:
    return {
        option
        for action in parser._actions
        if hidden or action.help != argparse.SUPPRESS
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }


def _sections(page: Path) -> tuple[str, dict[str, str]]:
    """The text before the first ``##`` heading, and each ``##``/``###`` section's text by the
    command its heading names (``### `blast --retract` ...`` is ``blast``'s)."""
    intro, current = "", None
    sections: dict[str, str] = {}
    for line in page.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^#{2,3} `?([a-z]+(?: verify| reapply)?)\b", line)
        if heading:
            current = heading.group(1)
            sections[current] = sections.get(current, "") + line + "\n"
        elif current is None:
            intro += line + "\n"
        else:
            sections[current] += line + "\n"
    return intro, sections


def test_the_cli_page_lists_every_command_and_only_those() -> None:
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| [`")]
    named = {
        " ".join(w for w in chunk.split() if w.islower())
        for row in rows
        for chunk in re.findall(r"`([^`]+)`", row.split("|")[1])
    }
    assert named == set(_leaf_commands())


def test_every_flag_is_named_where_its_command_is_documented() -> None:
    _, cli = _sections(DOCS / "cli.md")
    intro, extras = _sections(DOCS / "extras.md")
    configuration = (DOCS / "configuration.md").read_text(encoding="utf-8")
    missing = []
    for name, parser in _leaf_commands().items():
        where = cli.get(name, "") + (intro + extras[name] if name in extras else "")
        if name == "serve":
            where += configuration
        assert where, f"{name} has no section in docs/cli.md or docs/extras.md"
        missing += [f"{name} {flag}" for flag in sorted(_flags(parser) - set(FLAG.findall(where)))]
    assert missing == []


def _wrong_flags(text: str, where: str) -> list[str]:
    """Each ``--flag`` written after ``agent-custody-memory COMMAND`` that COMMAND does not
    take; continuation lines joined: after a backslash, or indented and opening with ``[``,
    ``(`` or ``--`` (a synopsis)."""
    commands = _leaf_commands()
    commands["certificate"] = commands["certificate verify"]
    text = re.sub(r"\n {4,}(?=[\[(-])", " ", re.sub(r"\\\n\s*", " ", text))
    wrong = []
    for number, line in enumerate(text.splitlines(), 1):
        pattern = r"agent-custody-memory ((?:certificate )?[a-z]+)([^`#\n]*)"
        for match in re.finditer(pattern, line):
            name = match.group(1)
            if name not in commands:
                continue  # e.g. an MCP client's server named agent-custody-memory
            flags = set(FLAG.findall(match.group(2))) - _flags(commands[name], hidden=True)
            wrong += [f"{where}:{number}: {name} has no {f}" for f in sorted(flags - {"--version"})]
    return wrong


def test_every_flag_a_page_writes_after_a_command_exists() -> None:
    wrong = [w for page in PAGES for w in _wrong_flags(page.read_text("utf-8"), page.name)]
    assert wrong == []


def test_every_example_in_the_help_uses_flags_that_exist() -> None:
    parsers = {"": build_parser(), **_leaf_commands()}
    wrong = [w for name, p in parsers.items() for w in _wrong_flags(p.format_help(), name)]
    assert wrong == []


def test_every_command_a_code_block_runs_exists() -> None:
    commands = {name.split()[0] for name in _leaf_commands()} | {"COMMAND"}
    wrong = []
    for page in PAGES:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            match = re.match(r"^\s*(?:\$ )?agent-custody-memory ([A-Za-z][\w-]*)", line)
            if match and match.group(1) not in commands:
                wrong.append(f"{page.name}:{number}: {line.strip()}")
    assert wrong == []


# -- the configuration -------------------------------------------------------------------------

#: ``docs/configuration.md``'s key tables, by the heading they follow, and the model of each.
TABLES: dict[str, Any] = {
    "### Top level": MemoryConfig,
    "### `[server]`": ServerConfig,
    "#### `[server.oauth]`": OAuthConfig,
    "### `[verify]`": VerifyConfig,
    "### `[[stores]]`": StoreConfig,
}


def _table_keys(heading: str) -> tuple[list[str], str]:
    """The first-column keys of the table after ``heading``, and the section's text."""
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    section = text[text.index(heading) :]
    end = re.search(r"\n#{2,4} ", section[len(heading) :])
    section = section[: end.start() + len(heading)] if end else section
    keys = re.findall(r"^\| `([a-z_\[\].]+)` \|", section, flags=re.MULTILINE)
    return keys, section


@pytest.mark.parametrize("heading", list(TABLES))
def test_every_config_key_is_in_its_table_and_every_row_is_a_key(heading: str) -> None:
    model = TABLES[heading]
    keys, _ = _table_keys(heading)
    nested = {"tokens[]": TokenConfig}
    rows = set()
    for key in keys:
        parent, _, child = key.rpartition(".")
        if parent:  # ``tokens[].spaces``: a key of the tokens' tables
            assert child in nested[parent].model_fields, key
            rows.add(parent.removesuffix("[]"))
        else:
            rows.add(key)
    tables = {"server", "verify", "stores"} if model is MemoryConfig else set()  # their own
    assert rows == set(model.model_fields) - tables


@pytest.mark.parametrize(
    ("heading", "column"),
    [("### `[server]`", 3), ("#### `[server.oauth]`", 2), ("### `[verify]`", 2)],
)
def test_the_defaults_the_tables_show_are_the_loaders(heading: str, column: int) -> None:
    """A default written as one TOML value (`8790`, `"stdio"`, `false`) is the model's; one
    written ``required`` is a required key."""
    model, (_, section) = TABLES[heading], _table_keys(heading)
    checked = 0
    for line in section.splitlines():
        key = re.match(r"^\| `([a-z_]+)` \|", line)
        if key is None:
            continue
        field, shown = model.model_fields[key.group(1)], line.split("|")[column].strip()
        if shown == "required":
            assert field.is_required(), key.group(1)
            continue
        literal = re.fullmatch(r"`([^`]+)`", shown)
        try:
            value = tomllib.loads(f"v = {literal.group(1)}")["v"] if literal else None
        except tomllib.TOMLDecodeError:
            continue  # `[issuer]`: a description, not a value
        if literal:
            assert value == field.get_default(call_default_factory=True), key.group(1)
            checked += 1
    assert checked >= 2


def test_the_nested_tables_keys_are_all_described() -> None:
    _, server = _table_keys("### `[server]`")
    _, oauth = _table_keys("#### `[server.oauth]`")
    for field in TokenConfig.model_fields:
        assert f"`{field}`" in server, f"[[server.tokens]] {field}"
    for field in OAuthGrantConfig.model_fields:
        assert re.search(rf"\b{field}\b", oauth), f"[server.oauth.scopes] {field}"


def _toml_samples() -> list[tuple[str, str]]:
    """Every ``memory.toml`` a page shows (not a ``pyproject.toml``), and the example's."""
    pages = [*PAGES, *sorted((ROOT / "plugins").glob("*/README.md"))]
    found = [
        (f"{page.relative_to(ROOT)} block {index}", block)
        for page in pages
        for index, block in enumerate(
            re.findall(r"```toml\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.DOTALL)
        )
        if "[project" not in block
    ]
    example = ROOT / "examples" / "memory.toml"
    return [*found, ("examples/memory.toml", example.read_text(encoding="utf-8"))]


@pytest.mark.parametrize(("where", "text"), _toml_samples(), ids=lambda v: str(v)[:40])
def test_every_config_a_page_shows_loads(tmp_path: Path, where: str, text: str) -> None:
    """The loader accepts it; its store tables are valid for their type when the plugin is
    installed (the core's own session has only the builtin ``memory`` type)."""
    from agent_custody_state.plugins import get_plugin_manager, resolve_ref

    config_file = tmp_path / "memory.toml"
    config_file.write_text(text, encoding="utf-8")
    config = load_config(config_file)
    manager = get_plugin_manager()
    for table in config.stores:
        if table.type not in manager.stores:
            continue  # a plugin not installed here (or writing-plugins' example type)
        settings = resolve_ref(manager.store_spec(table.type).settings)
        if settings is not None:
            settings.model_validate(table.settings())


def test_each_top_level_key_names_its_variable_and_its_flag_exists() -> None:
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    serve = _flags(_leaf_commands()["serve"], hidden=True)
    rows = {
        m.group(1): m.group(0)
        for m in re.finditer(r"^\| `([a-z_]+)` \|.*$", text, flags=re.MULTILINE)
    }
    for key in set(MemoryConfig.model_fields) - {"server", "verify", "stores"}:
        assert f"`AGENT_CUSTODY_{key.upper()}`" in rows[key], key
    flags = {f for row in rows.values() for f in FLAG.findall(row.split("|")[2])}
    assert flags and flags <= serve, flags - serve


def _variables_read_by_the_code() -> set[str]:
    sources = [ROOT / "core" / "src", ROOT / "sql" / "src", *(ROOT / "plugins").glob("*/src")]
    found = set()
    for folder in sources:
        for path in folder.rglob("*.py"):
            found |= set(re.findall(r"AGENT_CUSTODY_[A-Z0-9_]*[A-Z0-9]", path.read_text("utf-8")))
    return found - {"AGENT_CUSTODY_SERVER__PORT"}  # an example in a message


def test_every_variable_the_code_reads_is_documented_and_only_those() -> None:
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    read = _variables_read_by_the_code()
    assert read, "the scan found no variable: the source folders moved?"
    assert sorted(v for v in read if f"`{v}" not in text) == []
    fields = {f"AGENT_CUSTODY_{k.upper()}" for k in MemoryConfig.model_fields}
    fields |= {f"AGENT_CUSTODY_SERVER__{k.upper()}" for k in ServerConfig.model_fields}
    named = set(re.findall(r"AGENT_CUSTODY_[A-Z0-9_]*[A-Z0-9]", text))
    assert sorted(named - fields - read) == []


# -- the README and ./dev ----------------------------------------------------------------------


def _sessions() -> set[str]:
    text = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    return set(re.findall(r"@nox\.session\([^)]*\)\n(?:@[^\n]*\n)*def (\w+)\(", text))


def test_the_readme_quickstart_commands_exist() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick = readme[readme.index("## Quickstart") : readme.index("## Install")]
    block = re.search(r"```sh\n(.*?)```", quick, flags=re.DOTALL)
    assert block is not None
    commands = [line.split("#")[0].split() for line in block.group(1).splitlines()]
    assert commands == [["./dev", "demo"], ["./dev", "test"]]
    dev = (ROOT / "dev").read_text(encoding="utf-8")
    assert re.search(r"^\s*demo\) .*exec nox -s demo\b", dev, flags=re.MULTILINE)
    assert re.search(r"^\s*test\) .*exec nox\b", dev, flags=re.MULTILINE)
    assert "demo" in _sessions()
    assert '"agent-custody-memory", "demo"' in (ROOT / "noxfile.py").read_text(encoding="utf-8")


def test_every_dev_session_the_docs_name_exists() -> None:
    sessions, plugins = _sessions(), {p.name for p in (ROOT / "plugins").iterdir()}
    wrong = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for name in re.findall(r"\./dev -s ([a-z_]+)", text):
            if name not in sessions:
                wrong.append(f"{page.name}: ./dev -s {name}")
        for name in re.findall(r"\./dev -s \"plugin\(name='([a-z0-9-]+)'\)\"", text):
            if "plugin" not in sessions or name not in plugins:
                wrong.append(f"{page.name}: plugin {name}")
    assert wrong == []


# -- a --config that cannot be used ------------------------------------------------------------

BAD_FILES = {
    "missing": (None, "config file {f} does not exist"),
    "a folder": ("folder", "config file {f} is a folder; name the TOML file in it"),
    "bad TOML": ('ledger = "l.jsonl\n', "{f}: not valid TOML: "),
    "not UTF-8": (b'ledger = "\xff"\n', "config file {f}: not UTF-8 text"),
    "unknown key": ('ledger = "l.jsonl"\nledgr = 1\n', "{f}: ledgr: Extra inputs"),
    "wrong type": ('ledger = "l.jsonl"\n[server]\nport = "x"\n', "{f}: server.port: Input"),
    "wrong table": ('ledger = "l.jsonl"\nserver = 3\n', "{f}: server: Input should be"),
    # one message, not pydantic's one per member of ``str | dict[str, str]`` (retention.str: ...)
    "a number as a window": (
        'ledger = "l.jsonl"\n[retention]\norg = 365\n',
        "{f}: retention: retention window 'org': the pattern and its duration must be text",
    ),
}
COMMANDS = {
    "serve": ["serve"],
    "sweep": ["sweep", "--reason", "r", "--dry-run"],
    "forget": ["forget", "--fact", "f", "--reason", "r"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("case", list(BAD_FILES))
def test_a_bad_config_file_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, command: str
) -> None:
    content, expected = BAD_FILES[case]
    config = tmp_path / "memory.toml"
    if content == "folder":
        config.mkdir()
    elif isinstance(content, bytes):
        config.write_bytes(content)
    elif content is not None:
        config.write_text(content, encoding="utf-8")
    before = sorted(os.listdir(tmp_path))
    code = main([*COMMANDS[command], "--config", str(config)])
    err = capsys.readouterr().err
    assert code == 1 and len(err.splitlines()) == 1, err
    assert err.startswith("error: " + expected.format(f=config)), err
    assert sorted(os.listdir(tmp_path)) == before


def test_an_unreadable_config_file_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Permissions cannot stop root reading a file, so the read itself is made to fail."""
    config = tmp_path / "memory.toml"
    config.write_text('ledger = "l.jsonl"\n', encoding="utf-8")
    real = Path.read_text

    def refuse(self: Path, *args: Any, **kwargs: Any) -> str:
        if self == config:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", refuse)
    assert main(["sweep", "--reason", "r", "--dry-run", "--config", str(config)]) == 1
    err = capsys.readouterr().err
    assert err == f"error: config file {config}: cannot read it: Permission denied\n"
    assert os.listdir(tmp_path) == ["memory.toml"]

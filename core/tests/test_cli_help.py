"""The command line's manners (issue 14.3): ``--version``, help for every flag, and a ``--help``
that imports nothing heavy (the time itself is measured by bench/bench_cli.py)."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

import pytest

from agent_custody_state.cli import build_parser, main
from agent_custody_state.version import __version__

#: What ``--help`` (and importing the CLI) must not import: each costs tenths of a second.
HEAVY = (
    "agent_custody_state.server",
    "pydantic",
    "mcp",
    "sqlalchemy",
    "rich",
    "starlette",
    "uvicorn",
)


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"agent-custody-memory {__version__}\n"


def test_python_dash_m_is_the_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agent_custody_state", "--version"], capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout == f"agent-custody-memory {__version__}\n"


def test_every_command_and_flag_has_help() -> None:
    commands = _commands()
    assert {"facts", "history", "timeline", "show", "export", "import", "sweep", "plugins"} <= set(
        commands
    )
    missing = [
        f"{name} {action.option_strings or action.dest}"
        for name, sub in commands.items()
        for action in sub._actions
        if not action.help and not isinstance(action, argparse._HelpAction)
    ]
    assert missing == []


def test_time_flags_state_the_format() -> None:
    for name, sub in _commands().items():
        for action in sub._actions:
            if action.metavar == "TIME":
                assert action.help is not None and "RFC 3339 with an offset" in action.help, name
                assert re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", action.help), name
    sweep = _commands()["sweep"].format_help()
    assert "--before TIME" in sweep and "2026-01-01T00:00:00Z" in sweep


def test_help_imports_nothing_heavy() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "agent_custody_state", "--help"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and "facts" in done.stdout
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "agent_custody_state.cli" in imported  # the measurement itself works
    heavy = sorted(m for m in imported if m.split(".")[0] in HEAVY or m.startswith(HEAVY))
    assert heavy == []


@pytest.mark.parametrize("command", ["facts", "history", "timeline", "show", "sweep", "serve"])
def test_each_command_help_answers_without_heavy_imports(command: str) -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "agent_custody_state", command, "--help"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and "usage: agent-custody-memory" in done.stdout
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert not [m for m in imported if m.split(".")[0] in HEAVY or m.startswith(HEAVY)]

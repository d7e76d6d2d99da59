"""An earlier commit's code, exported from the repository's history, for the upgrade tests
(``core/tests/test_review9_upgrade.py`` and the SQLite plugin's): imported by path."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[4]
DATA = Path(__file__).resolve().parent
#: The commits whose files are kept here: the first (no chain), then three with the chain.
CHAINED = ["af8a474", "7a3a882", "29a8e2e"]
ALL = [("1ce3520", "plain")] + [(c, m) for c in CHAINED for m in ("plain", "crypto-shred")]
PARTS = ["core/src", "sql/src", "plugins/events-sqlite/src"]


def old_code(tmp_path: Path, commit: str) -> str:
    """``commit``'s code exported below ``tmp_path``, as a ``PYTHONPATH``; a skip without the
    commit in this checkout's history (a shallow clone)."""
    where = tmp_path / f"code-{commit}"
    where.mkdir()
    try:
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", commit, *PARTS],
            capture_output=True,
            check=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        pytest.skip(f"commit {commit} is not in this checkout's history")
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive.stdout, check=True)
    return os.pathsep.join(str(where / p) for p in PARTS)


#: An old process appending on request: one JSON command a line on stdin (``assert`` with
#: ``value`` and an optional ``subject``, ``forget`` with ``fact_id``, ``checkpoint``), one
#: JSON answer a line on stdout (the new fact's id, or null). argv: ledger, forget mode, and a
#: checkpoint key or "" (checkpoints then go to ``<ledger>.checkpoints``).
OLD_WRITER = """
import json, sys
from agent_custody_state.ledger.ledger import Ledger
options = {"forget_mode": sys.argv[2]}
if sys.argv[3]:
    options.update(checkpoint_key=sys.argv[3], checkpoints=sys.argv[1] + ".checkpoints")
book = Ledger(sys.argv[1], "k", **options)
for line in sys.stdin:
    cmd = json.loads(line)
    if cmd["op"] == "assert":
        event = book.assert_fact(subject=cmd.get("subject", "o"), predicate="p",
                                 value=cmd["value"], space="s", actor="old")
        print(json.dumps(event.fact.fact_id), flush=True)
    elif cmd["op"] == "forget":
        book.forget(fact_id=cmd["fact_id"], actor="old", reason="r")
        print("null", flush=True)
    else:
        book.checkpoint()
        print("null", flush=True)
"""


@contextlib.contextmanager
def old_writer(
    tmp_path: Path, commit: str, path: Path, mode: str, key: Path | None = None
) -> Iterator[Callable[..., Any]]:
    """``commit``'s code appending to ``path`` in a process of its own (a rolling upgrade: the
    old server still running while a new one writes); yields ``ask(op=..., ...)``."""
    env = {**os.environ, "PYTHONPATH": old_code(tmp_path, commit)}
    old = subprocess.Popen(
        [sys.executable, "-c", OLD_WRITER, str(path), mode, str(key or "")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert old.stdin is not None and old.stdout is not None

    def ask(**cmd: Any) -> Any:
        assert old.stdin is not None and old.stdout is not None
        old.stdin.write(json.dumps(cmd) + "\n")
        old.stdin.flush()
        return json.loads(old.stdout.readline())

    try:
        yield ask
    finally:
        old.stdin.close()
        old.wait(timeout=30)
        old.stdout.close()


def fixture(tmp_path: Path, commit: str, *, sqlite: bool = False) -> tuple[Path, dict[str, Any]]:
    """A copy of the files ``commit`` wrote (its JSONL or SQLite ones), and what it wrote
    (``made.json``, ``made-sqlite.json``)."""
    folder = tmp_path / commit
    shutil.copytree(DATA / (f"{commit}-sqlite" if sqlite else commit), folder)
    made = "made-sqlite.json" if sqlite else "made.json"
    return folder, json.loads((folder / made).read_text())


def later(info: dict[str, Any]) -> list[Any]:
    """The value of the assert after the checkpoint, unless it was forgotten for the outbox
    (or the version wrote no checkpoint)."""
    return ["Oslo"] if "later" in info and not info["outbox"] else []


def cli(capsys: Any, *args: str) -> tuple[int, str]:
    """The command line in this process; its output (a traceback fails the test)."""
    from agent_custody_state.cli import main

    code = main(list(args))
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out + captured.err

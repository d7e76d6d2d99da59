"""The README's tested command blocks: found by their marker, run as written in a copy of the tree.

A block is the first fenced ``sh`` block after a line ``<!-- tested: NAME ... -->`` in README.md.
``check_extras.py`` runs the ``install-from-checkout`` block; ``tests/test_repository.py`` checks
that the block is there and says what the install check expects. Running it in a copy keeps the
commands exactly as a reader types them (``.venv``, ``dist`` in the current folder) without
touching the developer's own checkout.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

INSTALL_BLOCK = "install-from-checkout"

# What a fresh clone does not have (the checkout's .gitignore, for a tree that is no git work tree).
_UNTRACKED = shutil.ignore_patterns(
    ".git", ".nox", ".venv", ".dev-tools", "dist", "build", "__pycache__", "*.egg-info",
    ".pytest_cache", ".mypy_cache", ".ruff_cache", ".import_linter_cache", "*.jsonl.lock",
)  # fmt: skip
# Variables of the calling session that a reader's shell would not have.
_SESSION_ONLY = (
    "VIRTUAL_ENV",
    "UV_PROJECT_ENVIRONMENT",
    "PYTHONPATH",
    "PYTHONHOME",
    "AGENT_CUSTODY_BLOCK_PLUGINS",
)


def block(readme: str, name: str) -> str:
    """The commands of the block marked ``<!-- tested: name``; raises ValueError when absent."""
    marker = re.search(rf"^<!-- tested: {re.escape(name)}\b.*-->$", readme, flags=re.M)
    if marker is None:
        raise ValueError(f"README.md has no <!-- tested: {name} --> marker")
    fence = re.compile(r"^```sh\n(.*?)^```$", flags=re.M | re.S).search(readme, marker.end())
    if fence is None:
        raise ValueError(f"README.md: no ```sh block after the {name} marker")
    return fence.group(1)


def commands(text: str) -> list[str]:
    """The block's command lines, comments and blank lines left out."""
    lines = (line.split(" #", 1)[0].strip() for line in text.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def copy_checkout(source: Path, target: Path) -> None:
    """Copy what a clone of ``source`` would hold (plus uncommitted edits) into ``target``."""
    shutil.rmtree(target, ignore_errors=True)
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=source,
        capture_output=True,
        check=False,
    )
    if listed.returncode != 0:  # not a git work tree: copy all but the usual untracked folders
        shutil.copytree(source, target, ignore=_UNTRACKED)
        return
    for name in filter(None, listed.stdout.decode().split("\0")):
        path = source / name
        if path.is_file():  # a tracked file deleted in the work tree is not copied
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target / name)


def run_block(text: str, cwd: Path) -> None:
    """Run the block with bash (``-euo pipefail``, each command echoed) in ``cwd``; raises
    AssertionError when a command fails. Output streams through, as in a reader's terminal."""
    env = {k: v for k, v in os.environ.items() if k not in _SESSION_ONLY}
    with subprocess.Popen(
        ["bash", "-euo", "pipefail", "-x", "-c", text],
        cwd=cwd,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    ) as shell:
        assert shell.stderr is not None
        for line in shell.stderr:
            if not line.startswith("++"):  # the trace of what `activate` runs is noise
                sys.stdout.write(line)
                sys.stdout.flush()
    if shell.returncode != 0:
        raise AssertionError(f"the README block exited {shell.returncode} in {cwd}")

"""An earlier commit's code, exported from the repository's history, for the upgrade tests
(``core/tests/test_review9_upgrade.py`` and the SQLite plugin's): imported by path."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
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

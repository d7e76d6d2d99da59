"""Temporaries at the top level (twenty-first review): ``temporaries`` sits beside
``regularfiles`` (the key files, review pages and exports write through it, not only the
stores); two writers of one name never collide and a stale leftover is removed."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import threading
import time
from pathlib import Path

from agent_custody_state.server.signing import _replace_file
from agent_custody_state.temporaries import pattern, temporary


def test_the_module_is_top_level_and_two_writers_of_one_name_do_not_collide(
    tmp_path: Path,
) -> None:
    assert importlib.util.find_spec("agent_custody_state.stores.temporaries") is None
    target = tmp_path / "k"
    assert temporary(target, "tmp") != temporary(target, "tmp")  # same pid, random part
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def write(number: int) -> None:
        start.wait()
        try:
            _replace_file(target, f"key {number}\n".encode(), 0o600)
        except BaseException as exc:  # pragma: no cover - the failure shown
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert [p.name for p in tmp_path.iterdir()] == ["k"]


def test_a_stale_temporary_is_removed_before_a_write(tmp_path: Path) -> None:
    child = subprocess.Popen(["true"])
    child.wait()
    stale = tmp_path / f".k.{child.pid}.0123456789abcdef.tmp"
    stale.write_text("left by a kill\n")
    then = time.time() - 7200
    os.utime(stale, (then, then))
    assert pattern("k", "tmp").fullmatch(stale.name)
    _replace_file(tmp_path / "k", b"key\n", 0o600)
    assert [p.name for p in tmp_path.iterdir()] == ["k"]

"""Twenty-first review, second wave: a ``pending_file`` this process cannot lock or write
stops the store at build, before any add reaches the platform.

``PendingAdds.check`` only read the sidecar (a missing file reads as empty), so a store whose
``pending_file`` was in a folder it could not write (read-only, or a lock path it cannot
open) started, and then every put sent its add to mem0 first and failed recording the event:
each put left a memory behind it and a cleanup owed, with a ``FileNotFoundError`` on the lock
file as the only explanation.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agent_custody_state.stores import StoreError
from agent_custody_state_mem0.pending import PendingAdds
from agent_custody_state_mem0.store import Mem0Store
from agent_custody_state_mem0.testing import FakeMem0

MakeStore = Callable[..., Mem0Store]


def test_an_unlockable_pending_file_stops_the_build(
    fake: FakeMem0, make_store: MakeStore, tmp_path: Path
) -> None:
    sidecar = tmp_path / "pending.jsonl"
    Path(f"{sidecar}.lock").mkdir()  # the lock cannot be opened (root ignores a chmod)
    with pytest.raises(StoreError, match=r"pending_file .*pending\.jsonl: cannot be read and "):
        make_store(pending_file=str(sidecar))
    assert not fake.items  # nothing was sent


def test_check_creates_the_lock_and_leaves_no_sidecar(tmp_path: Path) -> None:
    sidecar = tmp_path / "pending.jsonl"
    PendingAdds(sidecar).check()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pending.jsonl.lock"]


def test_a_damaged_sidecar_still_names_its_line(make_store: MakeStore, tmp_path: Path) -> None:
    sidecar = tmp_path / "pending.jsonl"
    sidecar.write_text("not json\n")
    with pytest.raises(StoreError, match=r"reading the pending add events failed: .*line 1"):
        make_store(pending_file=str(sidecar))

"""mem0's start-up message for a held pending-adds lock names the holder (twenty-second
review, left).

The start-up check of ``pending_file`` reads it under ``<pending_file>.lock``; a lock another
process held past the bound was reported as any ``OSError``: "cannot be read and locked (...);
name a file in a folder this process can write", wrong advice when the folder is fine and a
stopped or stuck process holds the lock. The ``LockWaitTimeout`` now gets its own words: the
holder, the bound, resume or end it, then start again. Other errors keep theirs.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_custody_state.stores import StoreError
from agent_custody_state_mem0 import store as store_module
from agent_custody_state_mem0.pending import PendingAdds
from agent_custody_state_mem0.store import Mem0Store

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "core" / "tests"))
from lockholder import holding  # the core's stuck lock holder

MakeStore = Callable[..., Mem0Store]


def test_a_held_lock_at_startup_names_the_holder_not_the_folder(
    make_store: MakeStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sidecar = tmp_path / "pending.jsonl"
    lock = Path(f"{sidecar}.lock")
    lock.touch()
    # The start-up check waits 0.3 s here, not the default 60 s.
    monkeypatch.setattr(store_module, "PendingAdds", functools.partial(PendingAdds, timeout=0.3))
    with holding(lock, stopped=True) as pid, pytest.raises(StoreError) as caught:
        make_store(pending_file=str(sidecar))
    text = str(caught.value)
    assert f"pending_file {sidecar} could not be checked at startup" in text, text
    assert f"by process {pid}" in text and "within 0.3s" in text, text
    assert "resume or end it" in text and text.endswith("then start again"), text
    assert "this process can write" not in text, text  # the folder was never the problem
    assert not sidecar.exists()


def test_a_folder_it_cannot_write_keeps_its_advice(
    make_store: MakeStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(self: PendingAdds) -> None:
        raise PermissionError(13, "Permission denied", f"{self.path}.lock")

    monkeypatch.setattr(PendingAdds, "check", refused)
    with pytest.raises(StoreError) as caught:
        make_store(pending_file=str(tmp_path / "pending.jsonl"))
    assert "cannot be read and locked" in str(caught.value)
    assert "folder this process can write" in str(caught.value)

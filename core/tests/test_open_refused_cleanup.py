"""A new ledger whose open is refused part-way leaves its folder as it found it, whatever the
descriptor budget (ninth review: with too few descriptors the backend's own open failed after
making the lock file, and ``l.jsonl.lock`` stayed behind)."""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_custody_state import Ledger


@contextlib.contextmanager
def descriptors_left(n: int) -> Iterator[None]:
    """Only ``n`` more descriptors may be opened until the block ends."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lowest_free = os.open(os.devnull, os.O_RDONLY)
    os.close(lowest_free)
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free + n, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize("mode", ["plain", "crypto-shred"])
def test_every_descriptor_budget_opens_or_leaves_nothing(tmp_path: Path, mode: str) -> None:
    refused = 0
    for n in range(8):
        folder = tmp_path / f"{n}"
        folder.mkdir()
        try:
            with descriptors_left(n):
                ledger = Ledger(folder / "l.jsonl", forget_mode=mode)
        except Exception:
            refused += 1
            assert list(folder.iterdir()) == [], (n, sorted(folder.iterdir()))
            continue
        ledger.assert_fact(subject="s", predicate="p", value=n, space="o", actor="a")
        ledger.close()
    assert refused  # some budget was too small: the test saw a refusal

"""``keygen`` on a full disk leaves no key file behind (ninth review: a short write left a
truncated ``memory.key`` and ``memory.key.pub`` of 60 bytes each, and the error named no file)."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from pathlib import Path


def _limit_file_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (60, 60))


def test_keygen_on_a_full_disk_leaves_no_truncated_key(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agent_custody_state", "keygen", "--out", "memory.key"],
        cwd=tmp_path,
        preexec_fn=_limit_file_size,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1, done
    assert done.stderr.strip() == "error: memory.key: File too large", done.stderr
    assert list(tmp_path.iterdir()) == []  # no key, no half key, no temporary
    done = subprocess.run(  # and with room, it works
        [sys.executable, "-m", "agent_custody_state", "keygen", "--out", "memory.key"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory.key", "memory.key.pub"]

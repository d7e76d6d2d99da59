"""The ninth review, over stdio: the memory server on a JSONL ledger when the outbox's disk is full.

The server runs in a real subprocess whose ``os.write`` is wrapped: while the file ``FULL``
holds ``<file name suffix>|<pattern>``, a write to such a file whose data holds the pattern is
cut short and the rest refused with ``ENOSPC``, as a full disk does. Deleting ``FULL`` gives the
space back.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main
from agent_custody_state_conformance.gateway import GatewayClient

pytestmark = pytest.mark.anyio

WRAPPER = """
import errno, os, runpy, sys

flag, real_write, cut = sys.argv.pop(1), os.write, set()

def write(fd, data):
    try:
        suffix, _, pattern = open(flag, "rb").read().partition(b"|")
        name = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return real_write(fd, data)
    if name.encode().endswith(suffix) and (fd in cut or pattern in bytes(data)):
        if fd in cut or len(data) <= 16:  # the rest of a write cut short: the disk is full
            cut.discard(fd)
            raise OSError(errno.ENOSPC, "No space left on device")
        cut.add(fd)
        return real_write(fd, bytes(data[:16]))
    return real_write(fd, data)

os.write = write
sys.argv = ["agent-custody-memory", *sys.argv[1:]]
runpy.run_module("agent_custody_state", run_name="__main__")
"""

CONFIG = """
ledger = "ledger.jsonl"

[[stores]]
name = "vectors"
type = "memory"
"""


def server(tmp_path: Path) -> tuple[GatewayClient, Path]:
    (tmp_path / "memory.toml").write_text(CONFIG)
    full = tmp_path / "FULL"
    client = GatewayClient.stdio(
        "serve",
        "--config",
        str(tmp_path / "memory.toml"),
        command=[sys.executable, "-c", WRAPPER, str(full)],
        cwd=str(tmp_path),
    )
    return client, full  # type: ignore[return-value]


async def test_a_forget_whose_owed_removal_the_disk_refuses_is_refused_naming_the_outbox(
    tmp_path: Path,
) -> None:
    """Before: "internal error in memory.forget: OSError: [Errno 28] No space left on device"
    (no file named, and a traceback in the log), with half an owe line left in the outbox."""
    client, full = server(tmp_path)
    async with client as gw:  # type: ignore[attr-defined]
        written = await gw.call(
            "memory.write",
            {"subject": "acct:1", "predicate": "id", "value": "4711-secret", "space": "org"},
        )
        fact_id = written.data["fact"]["factId"]
        full.write_bytes(b'.outbox|"owe"')
        refused = await gw.call("memory.forget", {"factId": fact_id, "reason": "gdpr"})
        assert refused.is_error
        box = tmp_path / "ledger.jsonl.outbox"
        assert refused.text == (
            f"could not record owed removals in {box}: No space left on device; nothing was changed"
        )
        assert not box.exists()
        got = await gw.call("memory.get", {"factId": fact_id})
        assert got.data["value"] == "4711-secret" and "forgotten" not in got.data
        full.unlink()  # space is back: the same server forgets it
        done = await gw.call("memory.forget", {"factId": fact_id, "reason": "gdpr"})
        assert not done.is_error, done.text
        assert not box.exists()
    with Ledger(tmp_path / "ledger.jsonl", read_only=True) as ledger:
        assert ledger.get(fact_id).forgotten is not None  # type: ignore[union-attr]


async def test_a_forget_whose_settle_the_disk_refuses_is_answered_done(tmp_path: Path) -> None:
    """Before: the forget committed and the store's copy was removed, and the caller was told
    "internal error in memory.forget: OSError ..." (a retry then said "already forgotten")."""
    client, full = server(tmp_path)
    async with client as gw:  # type: ignore[attr-defined]
        written = await gw.call(
            "memory.write",
            {"subject": "acct:2", "predicate": "id", "value": "0815-secret", "space": "org"},
        )
        fact_id = written.data["fact"]["factId"]
        full.write_bytes(b'.outbox|"settled"')
        done = await gw.call("memory.forget", {"factId": fact_id, "reason": "gdpr"})
        assert not done.is_error, done.text
        assert done.data["factId"] == fact_id
        got = await gw.call("memory.get", {"factId": fact_id})
        assert "value" not in got.data and got.data["forgotten"]["digestKind"] == "sha256"
    # The settle is lost as a crash loses one: the removal stays owed, whole lines only.
    lines = (tmp_path / "ledger.jsonl.outbox").read_bytes().splitlines(keepends=True)
    assert len(lines) == 1 and lines[0].startswith(b'{"owe":') and lines[0].endswith(b"\n")


async def test_the_ledger_on_a_full_disk_refuses_cleanly_and_serves_again(tmp_path: Path) -> None:
    """A write and a forget (its rewrite) the disk refuses: a named refusal, the ledger's bytes
    unchanged, the value not reported erased, no temporary left; once space is back the same
    server writes and forgets, and ``verify`` passes."""
    client, full = server(tmp_path)
    path = tmp_path / "ledger.jsonl"
    async with client as gw:  # type: ignore[attr-defined]
        written = await gw.call(
            "memory.write",
            {"subject": "acct:3", "predicate": "id", "value": "4242-secret", "space": "org"},
        )
        fact_id = written.data["fact"]["factId"]
        before = path.read_bytes()
        full.write_bytes(b"ledger.jsonl|")
        refused = await gw.call(
            "memory.write", {"subject": "acct:4", "predicate": "id", "value": "x", "space": "org"}
        )
        assert refused.is_error
        assert refused.text == (
            f"could not append to {path}: [Errno 28] No space left on device; nothing was written"
        )
        full.write_bytes(b".forget.tmp|")
        refused = await gw.call("memory.forget", {"factId": fact_id, "reason": "gdpr"})
        assert refused.is_error and refused.text.endswith(
            "No space left on device; the ledger is unchanged"
        ), refused.text
        assert path.read_bytes() == before
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
        got = await gw.call("memory.get", {"factId": fact_id})
        assert got.data["value"] == "4242-secret"
        full.unlink()
        again = await gw.call(
            "memory.write", {"subject": "acct:4", "predicate": "id", "value": "x", "space": "org"}
        )
        assert not again.is_error, again.text
        done = await gw.call("memory.forget", {"factId": fact_id, "reason": "gdpr"})
        assert not done.is_error, done.text
    assert main(["verify", "--ledger", str(path)]) == 0

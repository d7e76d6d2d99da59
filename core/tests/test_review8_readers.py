"""Eighth review, long-lived readers of a JSONL ledger another process forgets from: the file
the reader holds open (``HeldFile``) is emptied by the forget, so no descriptor of another
process keeps the erased value; every read path of the reader sees the forget at once; and a
stream of the stored lines under way when the file is emptied ends with an error, never as a
ledger silently cut short."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_custody_state import Ledger
from agent_custody_state.backends import jsonl_lines
from agent_custody_state.plugin import EventBackendError

SECRET = "SECRET-r8r-7f3a"
FACT = {"subject": "s", "predicate": "p", "space": "o", "actor": "a"}

#: Forgets one fact in another process, then compacts (the CLI's ``forget`` does the first).
FORGET = """
import sys
from agent_custody_state import Ledger
with Ledger(sys.argv[1], forget_mode=sys.argv[3]) as ledger:
    ledger.forget(fact_id=sys.argv[2], actor="a", reason="asked")
    ledger.compact()
"""


def _open_files_holding(needle: bytes) -> list[str]:
    """This process's open files (``/proc/self/fd``) whose bytes hold ``needle``."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        link = f"/proc/self/fd/{fd}"
        try:
            target = os.readlink(link)
            if not target.startswith("/") or "(deleted)" not in target:
                continue
            with open(link, "rb") as held:
                if needle in held.read():
                    found.append(target)
        except OSError:
            continue  # the descriptor of ``listdir`` itself, gone already
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
@pytest.mark.parametrize(
    ("mode", "read_only"), [("plain", False), ("plain", True), ("crypto-shred", True)]
)
def test_a_reader_keeps_no_forgotten_value_another_process_erased(
    tmp_path: Path, mode: str, read_only: bool
) -> None:
    """A reader holds the file it indexed open between reads (``HeldFile``). A forget in
    another process renamed a new file over it, and the old one, with the value in plain text,
    stayed readable through the reader's descriptor (``/proc/<pid>/fd``), its blocks never
    reclaimed, until the reader's next read: hours for an idle memory server."""
    path = tmp_path / "ledger.jsonl"
    with Ledger(path, forget_mode=mode) as writer:
        fact_id = writer.assert_fact(**FACT, value=SECRET).fact_id
        writer.assert_fact(**{**FACT, "subject": "t"}, value="kept")
    with Ledger(path, forget_mode=mode, read_only=read_only) as reader:
        fact = reader.get(fact_id)
        assert fact is not None and fact.value == SECRET
        held = _open_files_holding(SECRET.encode()) if mode == "plain" else []
        assert held == []  # the file is not deleted yet: nothing but the ledger holds it
        shredding = getattr(reader.backend, "keys", None)
        if shredding is not None:  # the reader's own key store connection, open before
            sealed = reader.backend.inner.get_assert(fact_id)
            kid = sealed.fact.value["kid"]
            assert kid in shredding.get({kid})
        subprocess.run([sys.executable, "-c", FORGET, str(path), fact_id, mode], check=True)
        if shredding is not None:  # destroyed and compacted away: this reader sees it gone
            assert shredding.get({kid}) == {}
        assert SECRET.encode() not in path.read_bytes()
        assert _open_files_holding(SECRET.encode()) == []  # before any read of the reader
        # Every read path sees the forget at once.
        fact = reader.get(fact_id)
        assert fact is not None and fact.value is None and fact.forgotten is not None
        reads = [
            reader.as_of(subject="s", predicate="p", space="o"),
            reader.history(fact_id),
            reader.facts(),
            reader.timeline(subject="s"),
            reader.learned_before("2999-01-01T00:00:00Z"),
            list(reader.export()),
        ]
        assert SECRET not in repr(reads)
        assert "kept" in repr(reader.facts())


def test_a_stream_of_the_file_emptied_by_a_forget_fails_instead_of_ending_short(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``stored_events`` streams the file it opened, without the lock, after the lock is let go
    of; a forget that empties the file it replaced (above) cut such a stream short, and it
    ended as if the ledger did (a verify then judged a torn last line). It is an error now."""
    monkeypatch.setattr(jsonl_lines, "CHUNK", 64)  # the stream reads the file in pieces
    path = tmp_path / "ledger.jsonl"
    with Ledger(path) as writer:
        fact_ids = [writer.assert_fact(**FACT, value=f"v{i}").fact_id for i in range(20)]
        stream = writer.backend.stored_events()
        next(stream)  # opened, its size taken
        subprocess.run([sys.executable, "-c", FORGET, str(path), fact_ids[0], "plain"], check=True)
        with pytest.raises(EventBackendError, match="rewritten by a forget"):
            list(stream)
        assert len(list(writer.backend.stored_events())) == 21  # read again: whole


def _pids_serving(ledger: Path) -> list[int]:
    """The processes whose command line names ``ledger`` (the server spawned for it)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if str(ledger).encode() in fh.read().split(b"\0"):
                        pids.append(int(entry))
            except OSError:
                continue
    return pids


def _held_by(pid: int, needle: bytes) -> list[str]:
    """The deleted files process ``pid`` holds open whose bytes hold ``needle``."""
    found = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        link = f"/proc/{pid}/fd/{fd}"
        try:
            if "(deleted)" in os.readlink(link):
                with open(link, "rb") as held:
                    if needle in held.read():
                        found.append(link)
        except OSError:
            continue
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_an_idle_memory_server_keeps_no_value_the_cli_forgot(tmp_path: Path) -> None:
    """The memory server over stdio is the long-lived reader: it read a fact, the CLI's
    ``forget`` erased it in another process, and until the server's next call the old file with
    the value stayed open in the server (readable through ``/proc/<pid>/fd``)."""
    anyio = pytest.importorskip("anyio")
    gateway = pytest.importorskip("agent_custody_state_conformance.gateway")
    path = tmp_path / "ledger.jsonl"
    with Ledger(path) as writer:
        fact_id = writer.assert_fact(**FACT, value=SECRET).fact_id

    async def scenario() -> None:
        serve = ("serve", "--ledger", str(path))
        async with gateway.GatewayClient.stdio(*serve, agent="support-agent") as gw:
            result = await gw.call("memory.get", {"factId": fact_id})
            assert SECRET in result.text
            (server,) = _pids_serving(path)
            forget = ["forget", "--ledger", str(path), "--fact", fact_id, "--reason", "asked"]
            subprocess.run([sys.executable, "-m", "agent_custody_state", *forget], check=True)
            assert _held_by(server, SECRET.encode()) == []  # idle: no call since the forget
            result = await gw.call("memory.get", {"factId": fact_id})
            assert SECRET not in result.text and result.data["forgotten"] is not None

    anyio.run(scenario)


def test_verify_reads_again_when_a_forget_cut_its_read_short(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``verify`` on a live ledger may be cut short by another process's forget (the file it
    streams is emptied): it reads the ledger again, once, rather than failing."""
    from agent_custody_state.cli import main, proofs

    path = tmp_path / "ledger.jsonl"
    with Ledger(path) as ledger:
        ledger.assert_fact(subject="s", predicate="p", value="v", space="org", actor="a")
    real, calls = proofs._verified, []

    def cut_once(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 1:
            raise jsonl_lines.CutShort(f"{path} was cut short while it was being read")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(proofs, "_verified", cut_once)
    assert main(["verify", "--ledger", str(path)]) == 0
    assert len(calls) == 2 and capsys.readouterr().out.startswith(f"ok: {path}: 1 events")

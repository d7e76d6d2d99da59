"""Twentieth review, part 3: what the first half left.

- Raw messages no longer reach a log line or a tool result through ``memory.sweep``'s stopped
  sweep, a flow whose caller was cancelled (``stores.finish``), a failed ``event_appended`` hook
  (``listeners``, ``Ledger._appended``) or the stdio encoder (``maskedtrace``).
- The key files' and the review pages' temporaries carry a random part, and stale ones go.
- Ctrl-C during ``sweep`` says what was forgotten before it, then exits 130.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import io
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage
from pydantic import BaseModel, field_serializer

from agent_custody_state import AssertRequest, Ledger
from agent_custody_state.ledger.host import default_host
from agent_custody_state.ledger.model import Fact
from agent_custody_state.plugin import hookimpl
from agent_custody_state.plugins import PluginManager
from agent_custody_state.server.service import MemoryService
from agent_custody_state.server.stdio import _encoded
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore, MemoryVendor

SECRET = "diagnosis HIV positive, SSN 123-45-6789"
META = {"agent-custody/receipt": "rcpt-1", "agent-custody/agent": "agent-a"}
FAR = "2999-01-01T00:00:00Z"


def _logged(caplog: pytest.LogCaptureFixture) -> str:
    """Every record's message and traceback, as a handler would print them."""
    return "\n".join(f"{r.getMessage()}\n{r.exc_text or ''}" for r in caplog.records)


def _assert(ledger: Ledger, subject: str, value: str) -> str:
    return ledger.assert_fact(
        subject=subject, predicate="p", value=value, space="org", actor="a"
    ).fact_id


# -- memory.sweep stopped by an unexpected exception ------------------------------------------


def test_a_sweep_stopped_by_a_bug_shows_no_value(caplog: pytest.LogCaptureFixture) -> None:
    """The exception that stopped the sweep quoted the fact being forgotten (a driver quoting
    the row): its text went into the tool result and, with its traceback, into the log."""
    with Ledger("memory:") as ledger:
        for number in range(3):
            _assert(ledger, f"s{number}", f"{SECRET} #{number}")
        forget = ledger._forget
        calls: list[str] = []

        def failing(fact_id: str, *args: Any, **kwargs: Any) -> Any:
            calls.append(fact_id)
            if len(calls) == 2:
                fact = ledger.get(fact_id)
                assert fact is not None
                raise ValueError(f"row refused: {fact.value!r}")
            return forget(fact_id, *args, **kwargs)

        ledger._forget = failing  # type: ignore[method-assign]
        service = MemoryService.build(ledger)
        try:
            with caplog.at_level(logging.ERROR):
                result = anyio.run(
                    service.call, "memory.sweep", {"reason": "r", "before": FAR}, META, "gateway"
                )
        finally:
            service.close()
    assert result.is_error
    message = result.texts[0]
    assert message.startswith("the sweep stopped after forgetting 1 fact ("), message
    assert "internal error in memory.sweep: ValueError" in message
    assert "SSN" not in str(result.texts) + str(result.structured)
    logged = _logged(caplog)
    assert "the sweep stopped after forgetting 1 fact" in logged
    assert "ValueError (message withheld)" in logged and "Traceback" in logged
    assert "SSN" not in logged


# -- a flow whose caller was cancelled ---------------------------------------------------------


class _Quoting(InProcessStore):
    """A store whose put waits for ``gate``, then fails quoting the fact, as a vendor's 422."""

    def __init__(self) -> None:
        super().__init__("s", MemoryVendor())
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    async def put(self, fact: Fact) -> str:
        self.entered.set()
        await self.gate.wait()
        raise RuntimeError(f"422 Unprocessable Entity: {{'input': {fact.value!r}}}")


def test_a_cancelled_callers_failed_flow_is_logged_without_the_value(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``finish`` logged the raised ``StoreWriteError`` with ``exc_info``: its cause, the
    vendor's exception quoting the value, was printed whole."""

    async def scenario() -> None:
        with Ledger("memory:") as ledger:
            store = _Quoting()
            custody = Custody(ledger, [store])
            request = AssertRequest(
                subject="s", predicate="p", value=SECRET, space="org", actor="a"
            )
            caller = asyncio.ensure_future(custody.write(request))
            await store.entered.wait()
            caller.cancel()  # asyncio's own cancel: the flow runs on in its own task
            store.gate.set()
            with pytest.raises(asyncio.CancelledError):
                await caller

    with caplog.at_level(logging.ERROR, logger="agent_custody_state.stores.finish"):
        asyncio.run(scenario())
    [record] = [r for r in caplog.records if r.name == "agent_custody_state.stores.finish"]
    assert record.levelno == logging.ERROR
    assert "store s refused the write: 422 Unprocessable Entity" in record.getMessage()
    assert "RuntimeError (message withheld)" in (record.exc_text or "")
    assert "SSN" not in _logged(caplog)


# -- event_appended hooks ----------------------------------------------------------------------


class _Webhook:
    @hookimpl
    def event_appended(self, event: Any) -> None:
        raise RuntimeError(f"webhook refused the body {{'value': {event.fact.value!r}}}")


def test_a_failed_hooks_traceback_masks_the_events_value(
    isolated_plugins: PluginManager, caplog: pytest.LogCaptureFixture
) -> None:
    isolated_plugins.register_plugin(_Webhook(), name="webhook")
    with caplog.at_level(logging.ERROR), Ledger("memory:") as ledger:
        _assert(ledger, "s", SECRET)
    [record] = caplog.records
    assert "plugin webhook failed" in record.getMessage()
    assert "webhook refused the body" in (record.exc_text or "")  # the plugin's own words
    assert "SSN" not in _logged(caplog)


class _Host:
    """A host of a program's own, whose announcement fails quoting the event."""

    def open_backend(self, location: str, **options: Any) -> Any:
        return default_host().open_backend(location, **options)

    def event_appended(self, ledger: Any, event: Any) -> None:
        raise RuntimeError(f"could not announce {event.fact.value!r}")


def test_a_failed_hosts_announcement_is_logged_without_its_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The ledger may not import the stores' masking (its layer): it logs the type only."""
    with caplog.at_level(logging.ERROR), Ledger("memory:", host=_Host()) as ledger:
        event_id = ledger.assert_fact(
            subject="s", predicate="p", value=SECRET, space="org", actor="a"
        ).event_id
    [record] = caplog.records
    assert record.getMessage() == f"event_appended hook failed for event {event_id}"
    assert "RuntimeError (message withheld)" in (record.exc_text or "")
    assert "SSN" not in _logged(caplog)


# -- the stdio encoder -------------------------------------------------------------------------


class _Quoted(BaseModel):
    """A plugin's object in a tool result whose serializer fails quoting what it holds."""

    text: str

    @field_serializer("text")
    def _refuse(self, text: str) -> str:
        raise ValueError(f"cannot serialize {text!r}")


def test_a_message_that_cannot_be_written_is_logged_without_its_values(
    caplog: pytest.LogCaptureFixture,
) -> None:
    result = {"content": [{"type": "text", "text": SECRET}], "extra": _Quoted(text=SECRET)}
    message = SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=1, result=result))
    with caplog.at_level(logging.ERROR, logger="agent_custody_state.server.stdio"):
        line = _encoded(message)
    assert b"could not be written as JSON" in line and b"SSN" not in line
    [record] = caplog.records
    assert "cannot serialize" in (record.exc_text or "")
    assert "SSN" not in _logged(caplog)


# -- Ctrl-C during the sweep command -----------------------------------------------------------


class _InterruptingBars:
    """The command's progress bars, whose ledger stage is stopped by Ctrl-C at its 3rd fact."""

    on = False

    def stages(self, descriptions: Any) -> Any:
        def report(stage: str, done: int, total: int) -> None:
            if stage == "ledger" and done == 2:
                raise KeyboardInterrupt

        return report


def test_ctrl_c_in_the_sweep_command_says_what_stands(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Exit 130 with nothing said, though two facts were forgotten and their certificates were
    owed (and ``finish`` logged the interrupt as a failed flow, traceback and all)."""
    from agent_custody_state.cli import main, progress

    @contextlib.contextmanager
    def bars(*args: Any, **kwargs: Any) -> Iterator[_InterruptingBars]:
        yield _InterruptingBars()

    assert main(["keygen", "--out", str(tmp_path / "k")]) == 0
    with Ledger(str(tmp_path / "l.jsonl")) as ledger:
        for number in range(4):
            _assert(ledger, f"s{number}", "v")
    (tmp_path / "certs").mkdir()
    capsys.readouterr()
    monkeypatch.setattr(progress, "progress_bars", bars)
    sweep = ["sweep", "--ledger", str(tmp_path / "l.jsonl"), "--before", FAR, "--reason", "r"]
    keys = ["--certificates", str(tmp_path / "certs"), "--key", str(tmp_path / "k")]
    with caplog.at_level(logging.INFO):
        assert main([*sweep, *keys]) == 130
    err = capsys.readouterr().err
    with Ledger(str(tmp_path / "l.jsonl")) as ledger:
        gone = [fact.fact_id for fact in ledger.facts() if fact.forgotten is not None]
    assert len(gone) == 2
    [line] = err.splitlines()
    assert line.startswith("agent-custody-memory: sweep interrupted after forgetting 2 facts ("), (
        err
    )
    assert all(fact_id in line for fact_id in gone)
    assert f"their certificates are kept in {tmp_path / 'certs'}" in line  # review 21
    assert "Traceback" not in err + _logged(caplog)  # not a failed flow: the user's own stop


# -- the key files' and the review pages' temporaries ------------------------------------------

OLD = 2 * 3600  # seconds: older than ``temporaries.STALE_AFTER``


def _dead_pid() -> int:
    """The pid of a process that has ended."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def _left(folder: Path, names: list[str]) -> list[Path]:
    """Temporaries a kill left (``reused``: this process's pid now), last written long ago."""
    paths = [folder / name for name in names]
    then = time.time() - OLD
    for path in paths:
        path.write_text("left by a kill\n")
        os.utime(path, (then, then))
    return paths


def test_keygen_writes_past_a_leftover_temporary_and_removes_stale_ones(tmp_path: Path) -> None:
    """A key file's temporary was ``.<name>.<pid>.tmp``, opened with ``O_EXCL``: one a kill
    left, whose pid this process now has, refused the write ("File exists")."""
    from agent_custody_state.cli import main

    dead, mine = _dead_pid(), os.getpid()
    stale = _left(tmp_path, [f".k.{dead}.tmp", f".k.pub.{dead}.0123456789abcdef.tmp"])
    kept = _left(tmp_path, [f".k.{mine}.tmp", f".other.{dead}.tmp"])  # live pid; not ours
    assert main(["keygen", "--out", str(tmp_path / "k")]) == 0
    assert not any(path.exists() for path in stale)
    assert {p.name for p in tmp_path.iterdir()} == {"k", "k.pub", *(p.name for p in kept)}


def test_a_review_writes_past_leftover_temporaries_and_removes_stale_ones(tmp_path: Path) -> None:
    from agent_custody_state.cli import main

    out, receipts = tmp_path / "review", tmp_path / "receipts"
    (out / "r").mkdir(parents=True)
    receipts.mkdir()
    dead, mine = _dead_pid(), os.getpid()
    stale = _left(out, [f".index.html.{dead}.tmp"])
    stale += _left(out / "r", [f".rcpt-1.html.{dead}.tmp", f".rcpt-1.json.{dead}.tmp"])
    kept = _left(out, [f".index.html.{mine}.tmp", f".notes.txt.{dead}.tmp"])
    assert main(["review", "--receipts", str(receipts), "--out", str(out)]) == 0
    assert not any(path.exists() for path in stale)
    assert {p.name for p in out.iterdir()} == {"index.html", "r", *(p.name for p in kept)}


# -- keygen when its success cannot be printed -------------------------------------------------


class _FullStdout(io.StringIO):
    """Standard output on a full disk: a write of text fails (an empty one passes, as on disk)."""

    def write(self, text: str) -> int:
        if text:
            raise OSError(errno.ENOSPC, "No space left on device")
        return 0


def test_keygen_with_standard_output_closed_writes_no_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``keygen >&-`` wrote both keys, then failed (exit 1) on its success line: a script saw
    a failure, and its retry was refused ("already exists"). Now refused before any key."""
    from agent_custody_state.cli import ClosedStdout, main

    monkeypatch.setattr(sys, "stdout", ClosedStdout())
    assert main(["keygen", "--out", str(tmp_path / "k")]) == 1
    assert "standard output is closed" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_keygen_says_its_keys_stand_when_its_line_cannot_be_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A full disk (or a reader gone) after the keys were written: exit 1 still (the command's
    output was lost), but the error says the keys were written and stand."""
    from agent_custody_state.cli import main

    monkeypatch.setattr(sys, "stdout", _FullStdout())
    assert main(["keygen", "--out", str(tmp_path / "k")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: wrote {tmp_path / 'k'} and {tmp_path / 'k.pub'} (key id "), err
    assert "No space left on device" in err and "the keys are ready to use" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k", "k.pub"]

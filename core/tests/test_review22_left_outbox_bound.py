"""The outbox waits for its lock as long as its JSONL ledger does (twenty-second review, left).

``Custody``, the server (``MemoryService.build``) and the ``sweep`` command built the outbox from
a path with its own 60 s bound, whatever the ledger's ``lock_timeout``: a ledger opened with
``lock_timeout=None`` (no bound) or a larger or smaller value did not pass it on. An outbox
given by path now takes a JSONL ledger's own bound (crypto-shred too, through its wrapper), and
60 s beside any other ledger; an ``Outbox`` object keeps the bound it was built with.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state.cli import main
from agent_custody_state.cli import sweep as sweep_cli
from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.model import Fact
from agent_custody_state.lockwait import DEFAULT_LOCK_TIMEOUT
from agent_custody_state.server.service import MemoryService
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.outbox import Outbox

FACT: dict[str, Any] = {"space": "o", "subject": "s", "predicate": "p", "actor": "a"}


@pytest.mark.parametrize("bound", [None, 0.25, 600.0])
def test_custody_and_the_server_take_the_jsonl_ledgers_bound(
    tmp_path: Path, bound: float | None
) -> None:
    with Ledger(tmp_path / "l.jsonl", lock_timeout=bound) as ledger:
        custody = Custody(ledger, outbox=tmp_path / "l.jsonl.outbox")
        assert custody.outbox is not None and custody.outbox.lock_timeout == bound
        service = MemoryService.build(ledger, require_gateway=False, outbox=tmp_path / "o")
        try:
            assert service.outbox is not None and service.outbox.lock_timeout == bound
            assert service.custody.outbox is service.outbox
        finally:
            service.close()


def test_a_crypto_shred_ledger_passes_its_bound_through_its_wrapper(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.jsonl", forget_mode="crypto-shred", lock_timeout=None) as ledger:
        custody = Custody(ledger, outbox=tmp_path / "o")
        assert custody.outbox is not None and custody.outbox.lock_timeout is None


def test_other_ledgers_and_outbox_objects_keep_their_own_bound(tmp_path: Path) -> None:
    with Ledger("memory:") as ledger:  # no lock_timeout at all: the default
        custody = Custody(ledger, outbox=tmp_path / "o")
        assert custody.outbox is not None
        assert custody.outbox.lock_timeout == DEFAULT_LOCK_TIMEOUT
    with Ledger(tmp_path / "l.jsonl", lock_timeout=None) as ledger:
        own = Outbox(tmp_path / "o", lock_timeout=5)
        assert Custody(ledger, outbox=own).outbox is own and own.lock_timeout == 5
        assert Custody(ledger).outbox is None


def test_an_owe_is_refused_after_the_ledgers_short_bound(tmp_path: Path) -> None:
    """Behaviour, not only the attribute: another holder of the outbox's lock (another open
    file description, as another process's) refuses an owe after the ledger's 0.25 s, where
    it waited 60 s before."""
    path = tmp_path / "o"
    path.touch()
    held = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        with Ledger(tmp_path / "l.jsonl", lock_timeout=0.25) as ledger:
            fact = ledger.assert_fact(**FACT, value="v").fact
            custody = Custody(ledger, outbox=path)
            assert custody.outbox is not None
            started = time.monotonic()
            with pytest.raises(EventBackendError):
                custody.outbox.owe([with_store(fact)], "forget", ledger.now())
            assert time.monotonic() - started < 10
    finally:
        os.close(held)
    assert path.read_bytes() == b""  # refused: nothing written


def with_store(fact: Fact) -> Fact:
    return fact.with_(external={"vec": "id-1"})


def test_the_sweep_command_opens_its_outbox_with_the_ledgers_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command checks the outbox's folder before it opens the ledger, then lets
    ``Custody`` open the outbox with the ledger's bound (seen through a ledger given a bound of its
    own here: the command line names none)."""
    location = tmp_path / "l.jsonl"
    with Ledger(location) as ledger:
        ledger.assert_fact(**FACT, value="v")
    opening = sweep_cli.open_mode

    def open_mode(where: str, mode: dict[str, Any], **kwargs: Any) -> Any:
        ledger = opening(where, mode, **kwargs)
        ledger.backend.lock_timeout = 0.5  # as ``Ledger(path, lock_timeout=0.5)`` sets it
        return ledger

    seen: list[Any] = []
    resume = Custody.resume

    async def spy(self: Custody) -> Any:
        seen.append(self.outbox)
        return await resume(self)

    monkeypatch.setattr(sweep_cli, "open_mode", open_mode)
    monkeypatch.setattr(Custody, "resume", spy)
    argv = ["sweep", "--ledger", str(location), "--before", "2999-01-01T00:00:00Z"]
    assert main([*argv, "--reason", "r"]) == 0
    [outbox] = seen
    assert outbox.path == tmp_path / "l.jsonl.outbox" and outbox.lock_timeout == 0.5


def test_the_sweep_command_still_refuses_a_missing_outbox_folder_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    location = tmp_path / "l.jsonl"
    with Ledger(location) as ledger:
        ledger.assert_fact(**FACT, value="v")
    before = location.read_bytes()
    config = tmp_path / "m.toml"
    config.write_text(f'ledger = "{location}"\noutbox = "{tmp_path / "no" / "o"}"\n')
    argv = ["sweep", "--config", str(config), "--before", "2999-01-01T00:00:00Z"]
    assert main([*argv, "--reason", "r"]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert location.read_bytes() == before

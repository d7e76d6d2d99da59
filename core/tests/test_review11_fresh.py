"""Eleventh review, fresh eyes on the ninth and tenth reviews' own code (docs/decisions.md,
"Fresh eyes on the session's code").

- The watcher of other processes' appends (``server/foreign.py``) survives a failed
  announcement: a flush whose ledger read failed ended the watcher's task, and with it the
  server's task group (the HTTP lifespan, the stdio server), although a failed poll was
  promised to be logged and tried again.
- A fact the ledger holds is never refused as a key when it is named: the key rules of
  ``text_arg`` (no U+0000, at most 2,048 bytes) are for keys written anew, but a forget,
  retract, confirm, hold or release naming a fact that an earlier version (or the TypeScript
  original) wrote under such an id was refused, so that fact could never be erased (an id
  the ledger does not hold is still refused naming the key, as the ninth review decided).
- ``forget --config`` and ``sweep --config`` keep their certificates in the file's
  ``certificates`` folder, as the server does: that folder is the list ``certificate reapply``
  re-applies after a restore, and the command-line erasures (the nightly sweep) were missing
  from it, so a restore brought their values back for good.
- A certificates folder on a filesystem without hard links (exFAT, FUSE mounts of object
  stores, which an off-host copy of the folder may well be) keeps its certificates: each was
  linked into place, which such a folder refuses, so every one was lost (an ERROR a forget).
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main as cli_main
from agent_custody_state.ledger import arguments
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.server.notify import Notifier
from agent_custody_state.server.resources import HEAD_URI
from agent_custody_state.server.signing import generate_key_pair
from agent_custody_state.server.worker import LedgerWorker
from agent_custody_state.stores.archive import CertificateArchive

FACT: dict[str, Any] = {"subject": "s", "predicate": "p", "space": "o", "actor": "a"}


class _Session:
    """A legacy subscriber: the URIs it was sent, awaitable."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self.told = anyio.Event()

    async def send_resource_updated(self, uri: Any) -> None:
        self.uris.append(str(uri))
        self.told.set()


def test_watcher_survives_a_failed_announcement(tmp_path: Path) -> None:
    location = tmp_path / "l.jsonl"
    worker = LedgerWorker()
    with Ledger(location) as here, Ledger(location) as elsewhere:
        notifier = Notifier(here, worker)
        session = _Session()
        notifier.legacy[1] = (session, {HEAD_URI})
        real, failures = notifier._uris, [OSError("database is locked")]

        def flaky(events: list[Any]) -> Any:
            if failures:
                raise failures.pop()
            return real(events)

        notifier._uris = flaky  # type: ignore[method-assign]

        async def main() -> None:
            async with anyio.create_task_group() as group:
                group.start_soon(notifier.foreign.watch, 0.005)
                with anyio.fail_after(5):
                    while notifier.foreign.mark is None:  # the first poll took the head
                        await anyio.sleep(0.005)
                    elsewhere.assert_fact(value=1, **FACT)
                    await session.told.wait()  # after the failed flush, the next one tells
                group.cancel_scope.cancel()

        try:
            anyio.run(main)
        finally:
            worker.close()
        assert not failures  # the failure happened
        assert session.uris == [HEAD_URI]  # told once, by the flush after the failed one


def _write_as_before(location: Path, fact_id: str) -> None:
    """A fact under ``fact_id`` as a version before the key rules (or the original) wrote it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(arguments, "key_problem", lambda *_a, **_k: None)
        with Ledger(location) as ledger:
            ledger.assert_fact(value="secret", fact_id=fact_id, **FACT)


@pytest.mark.parametrize("fact_id", ["f" * 3000, "with\x00nul"], ids=["long", "nul"])
def test_a_held_fact_under_an_old_key_can_be_forgotten(tmp_path: Path, fact_id: str) -> None:
    location = tmp_path / "l.jsonl"
    _write_as_before(location, fact_id)
    with Ledger(location) as ledger:
        with pytest.raises(LedgerError, match="fact_id"):  # a new key is still refused
            ledger.assert_fact(value="x", fact_id=fact_id + "2", **FACT)
        ledger.hold(fact_id=fact_id, actor="dpo", reason="audit")
        ledger.release(fact_id=fact_id, actor="dpo", reason="audit done")
        ledger.forget(fact_id=fact_id, actor="dpo", reason="erasure request")
    with Ledger(location) as reopened:
        fact = reopened.get(fact_id)
        assert fact is not None and fact.value is None


def test_an_unknown_fact_under_such_a_key_is_still_refused_naming_the_key() -> None:
    # The ninth review's refusal (test_review9_values) stands for ids the ledger does not hold.
    with Ledger("memory:") as ledger:
        for fact_id, why in (("f" * 3000, "fact_id is too long"), ("a\x00b", "fact_id holds U")):
            for act in (ledger.retract, ledger.forget, ledger.hold):
                with pytest.raises(LedgerError, match=why):
                    act(fact_id=fact_id, actor="a", reason="r")


def test_command_line_erasures_keep_their_certificates_in_the_configs_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    generate_key_pair(tmp_path / "memory.key")
    config = tmp_path / "memory.toml"
    config.write_text(
        'ledger = "l.jsonl"\nkey = "memory.key"\ncertificates = "certs"\nretention = "o=P1D"\n'
    )
    with Ledger(tmp_path / "l.jsonl") as ledger:
        ids = [ledger.assert_fact(value=n, **FACT).fact.fact_id for n in (1, 2)]
    forget = ["forget", "--config", str(config), "--fact", ids[0], "--reason", "gdpr"]
    assert cli_main(forget) == 0
    sweep = ["sweep", "--config", str(config), "--reason", "retention"]
    assert cli_main([*sweep, "--before", "2999-01-01T00:00:00.000Z"]) == 0
    capsys.readouterr()
    kept = sorted(p.name for p in (tmp_path / "certs").iterdir())
    assert kept == sorted(f"{i}.json" for i in ids)
    pub = str(tmp_path / "memory.key.pub")
    for name in kept:
        assert (
            cli_main(["certificate", "verify", str(tmp_path / "certs" / name), "--key", pub]) == 0
        )


def test_a_configured_folder_without_a_key_is_refused_before_any_erasure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "memory.toml"
    config.write_text('ledger = "l.jsonl"\ncertificates = "certs"\n')
    with Ledger(tmp_path / "l.jsonl") as ledger:
        fact_id = ledger.assert_fact(value=1, **FACT).fact.fact_id
    forget = ["forget", "--config", str(config), "--fact", fact_id, "--reason", "gdpr"]
    assert cli_main(forget) != 0
    assert "certificates in the --config file needs key" in capsys.readouterr().err
    with Ledger(tmp_path / "l.jsonl") as ledger:
        fact = ledger.get(fact_id)
        assert fact is not None and fact.value == 1


def test_a_folder_without_hard_links_keeps_its_certificates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(*_args: Any, **_kw: Any) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")  # as exFAT or a FUSE mount

    monkeypatch.setattr(os, "link", no_links)
    archive = CertificateArchive(tmp_path)
    first = archive.keep("f1", {"n": 1})
    second = archive.keep("f1", {"n": 2})  # never over the first
    assert (first.name, second.name) == ("f1.json", "f1.2.json")
    assert json.loads(first.read_text()) == {"n": 1}
    assert json.loads(second.read_text()) == {"n": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f1.2.json", "f1.json"]  # no aside

"""The twelfth review: certificates that survive a kill, and the sweep's honest exit.

- a process SIGKILLed between a forget's commit and its certificate's write (a real child
  process, killed where ``CertificateArchive.keep`` would write) leaves an intent; the next
  start (``Custody.resume``, ``sweep --config``) issues the certificate, signed, ``partial``,
  saying the byte scan could not be repeated, and ``certificate verify`` accepts it; an intent
  whose forget never committed is dropped;
- a sweep stopped part-way by the ledger keeps certificates of the facts it forgot before;
- ``sweep`` exits 1 when a certificate it was asked for could not be kept, printing it;
- a sweep stopped by a full disk says how many facts it forgot before it stopped;
- ``certificate reapply --dry-run`` refuses, as the real run, an HMAC digest without its key;
- ``write_new`` is not blocked by a stale temporary a SIGKILL left.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main
from agent_custody_state.server.signing import generate_key_pair
from agent_custody_state.stores import archive as archive_module
from agent_custody_state.stores.archive import CertificateArchive, write_new
from agent_custody_state.stores.flows import Custody

FACT: dict[str, Any] = {"predicate": "email", "space": "org", "actor": "a"}
SECRET = "kill.me.not@example.org"

#: A child that forgets with an archive and is SIGKILLed where the certificate would be kept.
KILLED = textwrap.dedent(
    """
    import os, signal, sys
    import anyio
    from agent_custody_state import Ledger
    from agent_custody_state.stores.archive import CertificateArchive
    from agent_custody_state.stores.flows import Custody

    ledger_path, folder, key, kind, *facts = sys.argv[1:]
    def kill(*_, **__):
        os.kill(os.getpid(), signal.SIGKILL)

    if kind == "before":  # killed before the forget commits
        Ledger.forget = kill
    else:  # killed after the commit, where the certificate would be kept
        CertificateArchive.keep = kill
    with Ledger(ledger_path) as ledger:
        custody = Custody(ledger, certificate_key=key, certificates=folder)
        if kind in ("forget", "before"):
            anyio.run(lambda: custody.forget(fact_id=facts[0], actor="dpo", reason="gdpr"))
        else:
            anyio.run(lambda: custody.sweep(
                before="2999-01-01T00:00:00Z", actor="dpo", reason="gdpr"))
    """
)


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def world(tmp_path: Path, count: int = 1) -> tuple[Path, Path, Path, Path, list[str]]:
    ledger = tmp_path / "l.jsonl"
    folder = tmp_path / "certs"
    folder.mkdir()
    key, pub, _ = generate_key_pair(tmp_path / "k.key")
    with Ledger(ledger) as book:
        ids = [
            book.assert_fact(subject=f"u{n}", value=f"{n}.{SECRET}", **FACT).fact.fact_id
            for n in range(count)
        ]
    return ledger, folder, Path(key), Path(pub), ids


def killed(ledger: Path, folder: Path, key: Path, kind: str, *facts: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", KILLED, str(ledger), str(folder), str(key), kind, *facts],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == -9, done.stderr  # killed at the point, not failed before it


def intents_in(folder: Path) -> list[Path]:
    """The erasure intents in a certificates folder (``stores.intents``)."""
    return sorted(folder.glob(".intent-*"))


def certificates(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.json"))


def predicate(path: Path) -> dict[str, Any]:
    envelope = json.loads(path.read_bytes())
    return json.loads(base64.b64decode(envelope["payload"]))["predicate"]  # type: ignore[no-any-return]


def resume(ledger: Path, folder: Path, key: Path) -> None:
    with Ledger(ledger) as book:
        anyio.run(Custody(book, certificate_key=str(key), certificates=folder).resume)


def test_a_certificate_lost_to_a_kill_is_issued_at_the_next_start(tmp_path: Path) -> None:
    ledger, folder, key, pub, [fact] = world(tmp_path)
    killed(ledger, folder, key, "forget", fact)
    assert certificates(folder) == []  # killed before the write: lost, before this fix
    with Ledger(ledger) as book:
        assert book.get(fact).value is None  # the forget committed
    intents = intents_in(folder)
    assert len(intents) == 1 and SECRET not in intents[0].read_text()
    resume(ledger, folder, key)
    [kept] = certificates(folder)
    code, out, err = cli(
        "certificate", "verify", str(kept), "--key", str(pub), "--ledger", str(ledger)
    )
    assert code == 0, out + err
    assert "outcome partial" in out
    got = predicate(kept)
    assert got["recovered"]["why"].startswith("the byte scan")
    assert got["verification"]["byteScan"]["scanned"] is False
    assert got["verification"]["result"] == "not verified"
    assert any("could not be repeated" in line for line in got["incomplete"])
    assert got["request"]["actor"] == "dpo" and got["request"]["reason"] == "gdpr"
    assert intents_in(folder) == []  # finished
    resume(ledger, folder, key)  # a second start issues nothing more
    assert certificates(folder) == [kept]


def test_the_sweep_command_finishes_what_a_killed_sweep_left(tmp_path: Path) -> None:
    ledger, folder, key, pub, ids = world(tmp_path, 2)
    killed(ledger, folder, key, "sweep")
    assert certificates(folder) == []
    config = tmp_path / "memory.toml"
    config.write_text(f'ledger = "{ledger}"\nkey = "{key}"\ncertificates = "{folder}"\n')
    code, out, err = cli(
        "sweep", "--config", str(config), "--before", "2999-01-01T00:00:00Z", "--reason", "r"
    )
    assert code == 0, err
    kept = certificates(folder)
    assert sorted(predicate(p)["fact"]["factId"] for p in kept) == sorted(ids)
    for path in kept:
        code, out, err = cli("certificate", "verify", str(path), "--key", str(pub))
        assert code == 0, out + err


def test_an_intent_whose_forget_never_committed_is_dropped(tmp_path: Path) -> None:
    ledger, folder, key, _, [fact] = world(tmp_path)
    killed(ledger, folder, key, "before", fact)
    assert len(intents_in(folder)) == 1
    resume(ledger, folder, key)
    assert certificates(folder) == []
    assert intents_in(folder) == []
    with Ledger(ledger) as book:
        assert book.get(fact).value == f"0.{SECRET}"  # nothing was forgotten by it


def test_a_sweep_a_fact_stopped_keeps_the_certificates_of_those_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the ledger issues a sweep's certificates after its last forget, so a fact that
    stopped it left the facts forgotten before it with none, for good."""
    ledger, folder, key, pub, _ = world(tmp_path, 3)
    from agent_custody_state.ledger import forgetting

    real = forgetting.LedgerForgetting._forget
    calls = []

    def third_fails(self: Any, fact_id: str, *args: Any, **kw: Any) -> Any:
        calls.append(fact_id)
        if len(calls) == 3:
            raise OSError("disk on fire")
        return real(self, fact_id, *args, **kw)

    monkeypatch.setattr(forgetting.LedgerForgetting, "_forget", third_fails)
    with Ledger(ledger) as book:
        custody = Custody(book, certificate_key=str(key), certificates=folder)
        with pytest.raises(OSError) as stopped:
            anyio.run(lambda: custody.sweep(before="2999-01-01T00:00:00Z", actor="dpo", reason="r"))
    assert len(stopped.value.swept.forgotten) == 2  # type: ignore[attr-defined]
    kept = certificates(folder)
    assert sorted(predicate(p)["fact"]["factId"] for p in kept) == sorted(calls[:2])
    for path in kept:
        assert cli("certificate", "verify", str(path), "--key", str(pub))[0] == 0


def test_the_sweep_exits_1_when_a_certificate_was_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, folder, key, _, _ = world(tmp_path, 2)

    def refused(*_: Any, **__: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(archive_module, "write_new", refused)
    code, out, err = cli(
        "sweep", "--ledger", str(ledger), "--before", "2999-01-01T00:00:00Z", "--reason", "r",
        "--certificates", str(folder), "--key", str(key),
    )  # fmt: skip
    assert code == 1, out + err
    assert "2 certificates could not be kept" in err and str(folder) in err
    assert out.startswith("forgot 2 facts")
    printed, text = [], out.split("\n", 1)[1].strip()
    while text:
        envelope, end = json.JSONDecoder().raw_decode(text)
        printed.append(envelope)
        text = text[end:].strip()
    assert len(printed) == 2 and all("payload" in e for e in printed)  # they cannot be reissued
    assert len(intents_in(folder)) == 1  # the next start keeps them


def _sweep_on_a_full_disk(folder: Path) -> tuple[int, str, int]:
    from test_review9_exhaust import disk_full_past

    path = folder / "l.jsonl"
    with Ledger(path) as book:
        for n in range(4):
            book.assert_fact(subject=f"s{n}", value=f"v{n}", **FACT)
    with disk_full_past(path.stat().st_size + 600):  # room for one forget, not two
        code, _, err = cli(
            "sweep", "--ledger", str(path), "--before", "2999-01-01T00:00:00Z", "--reason", "r"
        )
    forgets = sum('"kind":"forget"' in line for line in path.read_text().splitlines())
    return code, err, forgets


def test_a_sweep_stopped_by_a_full_disk_says_what_it_forgot_before(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from test_review9_exhaust import in_child

    code, err, forgets = in_child(_sweep_on_a_full_disk, tmp_path)
    assert code == 1 and forgets == 1, err
    assert "the sweep stopped after forgetting 1 fact" in err, err


def test_a_dry_reapply_refuses_an_hmac_digest_without_its_key(tmp_path: Path) -> None:
    ledger, folder, key, pub, [fact] = world(tmp_path)
    backup = tmp_path / "backup.jsonl"
    shutil.copy(ledger, backup)
    with Ledger(ledger, forget_key="k3y") as book:
        custody = Custody(book, certificates=folder, certificate_key=str(key))
        anyio.run(lambda: custody.forget(fact_id=fact, actor="dpo", reason="gdpr"))
    shutil.copy(backup, ledger)
    base = ["certificate", "reapply", str(folder), "--ledger", str(ledger), "--key", str(pub)]
    code, out, err = cli(*base)
    assert code == 1 and "HMAC digest" in err
    code, out, err = cli(*base, "--dry-run")
    assert code == 1 and "HMAC digest" in err, out + err  # before: "would forget", exit 0


def test_a_stale_temporary_never_blocks_a_write(tmp_path: Path) -> None:
    import threading

    target = tmp_path / "f.json"
    stale = tmp_path / f".f.json.{os.getpid()}.{threading.get_ident()}.partial"
    stale.write_bytes(b"left by a SIGKILL, pid reused")
    write_new(target, b"{}\n")
    assert target.read_bytes() == b"{}\n"
    assert stale.read_bytes() == b"left by a SIGKILL, pid reused"  # never written over
    (tmp_path / f".h.json.{os.getpid()}.{threading.get_ident()}.partial").write_bytes(b"x")
    assert CertificateArchive(tmp_path).keep("h", {"a": 1}).name == "h.json"  # before: h.2.json


def test_an_intent_of_a_process_still_running_is_left_to_it(tmp_path: Path) -> None:
    """A second server on the folder starting while the first forgets: not its to finish."""
    ledger, folder, key, _, [fact] = world(tmp_path)
    running = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        import socket

        body = {
            "kind": "agent-custody-erasure-intent/v1",
            "facts": [fact],
            "request": {"actor": "dpo", "reason": "gdpr", "receiptId": None},
            "at": "2026-01-01T00:00:00.000Z",
            "owner": {"host": socket.gethostname(), "pid": running.pid},
        }
        intent = folder / ".intent-x"
        intent.write_text(json.dumps(body))
        resume(ledger, folder, key)
        assert intent.exists()  # its process runs: its flow finishes it
    finally:
        running.communicate(b"", timeout=30)
    resume(ledger, folder, key)
    assert not intent.exists()  # its process is gone, its forget never committed: dropped


def test_an_intent_whose_pid_was_reused_is_finished(tmp_path: Path) -> None:
    """The pid an intent names runs, but it is another process (the recorder was killed and its
    pid reused, or the host rebooted): the recorded start tells them apart, so the certificate
    a kill lost is issued instead of waiting for a process that will never finish it."""
    import socket

    ledger, folder, key, _, [fact] = world(tmp_path)
    killed(ledger, folder, key, "forget", fact)
    [intent] = intents_in(folder)
    body = json.loads(intent.read_text())
    assert body["owner"]["started"]  # the recorder's boot id and start time
    running = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:  # the pid now names a running process, which is not the recorder
        body["owner"] = {**body["owner"], "host": socket.gethostname(), "pid": running.pid}
        intent.write_text(json.dumps(body))
        resume(ledger, folder, key)
        assert not intent.exists()
        [kept] = certificates(folder)
        assert predicate(kept)["fact"]["factId"] == fact
    finally:
        running.communicate(b"", timeout=30)

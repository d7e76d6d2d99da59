"""The thirteenth review, fresh eyes on the twelfth's code.

Erasure intents (``stores.intents``) are unsigned files from which a start signs certificates:
- an intent naming a kind of storage a certificate does not know stopped every start
  (``KeyError``), and ``crypto-shred`` on a plain ledger had a plain value certified as sealed;
- an intent whose time is not a time certified any uncertified forget of its request;
- a FIFO named ``.intent-*`` blocked every start for good;
- two starts at once on one folder both issued the lost certificate (``.json`` and ``.2.json``).

``review --out DIR`` with the receipts in ``DIR/r`` replaced each signed receipt with a copy
whose erased values are hidden (its signatures no longer verify): refused, nothing written.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main
from agent_custody_state.server.signing import generate_key_pair
from agent_custody_state.stores import intents
from agent_custody_state.stores.flows import Custody

FACT: dict[str, Any] = {"predicate": "email", "space": "org", "actor": "a"}


def world(tmp_path: Path) -> tuple[Path, Path, Path, str]:
    """A ledger with one fact forgotten by ``dpo``/``gdpr`` and no certificate kept of it."""
    ledger, folder = tmp_path / "l.jsonl", tmp_path / "certs"
    folder.mkdir()
    key, _, _ = generate_key_pair(tmp_path / "k.key")
    with Ledger(ledger) as book:
        fact = book.assert_fact(subject="u", value="x@example.org", **FACT).fact.fact_id
        anyio.run(lambda: Custody(book).forget(fact_id=fact, actor="dpo", reason="gdpr"))
    return ledger, folder, Path(key), fact


def intent(folder: Path, fact: str, **over: Any) -> Path:
    """An intent a killed process left (recorded before the forget, its owner gone)."""
    body = {
        "kind": intents.KIND,
        "facts": [fact],
        "request": {"actor": "dpo", "reason": "gdpr", "receiptId": None},
        "at": "2000-01-01T00:00:00.000Z",
        "stored": {},
        "owner": {},
        **over,
    }
    path = folder / ".intent-left"
    path.write_text(json.dumps(body))
    return path


def resume(ledger: Path, folder: Path, key: Path) -> None:
    with Ledger(ledger) as book:
        anyio.run(Custody(book, certificate_key=str(key), certificates=folder).resume)


def certificates(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.json"))


def predicate(path: Path) -> dict[str, Any]:
    envelope = json.loads(path.read_bytes())
    return json.loads(base64.b64decode(envelope["payload"]))["predicate"]  # type: ignore[no-any-return]


def test_an_unknown_kind_of_storage_in_an_intent_never_stops_a_start(tmp_path: Path) -> None:
    ledger, folder, key, fact = world(tmp_path)
    intent(folder, fact, stored={fact: "bogus"})
    resume(ledger, folder, key)  # before: KeyError 'bogus', at every start
    [kept] = certificates(folder)
    assert predicate(kept)["sanitization"]["method"] == "overwrite-and-vacuum"


def test_an_intent_cannot_have_a_plain_value_certified_as_sealed(tmp_path: Path) -> None:
    ledger, folder, key, fact = world(tmp_path)
    intent(folder, fact, stored={fact: "crypto-shred"})
    resume(ledger, folder, key)
    [kept] = certificates(folder)
    got = predicate(kept)["sanitization"]
    assert got["method"] == "overwrite-and-vacuum", got  # before: "only ever stored encrypted"


@pytest.mark.parametrize("at", ["", "not a time", 5])
def test_an_intent_without_a_time_certifies_nothing(tmp_path: Path, at: Any) -> None:
    """Its time is what tells its forget from an earlier one of the same request."""
    ledger, folder, key, fact = world(tmp_path)
    path = intent(folder, fact, at=at)
    resume(ledger, folder, key)
    assert certificates(folder) == []  # before: a certificate of a forget it did not cause
    assert path.exists()  # unreadable: logged, left as it is


def test_an_intent_that_is_not_a_regular_file_never_blocks_a_start(tmp_path: Path) -> None:
    ledger, folder, key, _ = world(tmp_path)
    fifo = folder / ".intent-fifo"
    os.mkfifo(fifo)
    (folder / ".intent-link").symlink_to(os.devnull)
    done = threading.Event()

    def start() -> None:
        resume(ledger, folder, key)
        done.set()

    worker = threading.Thread(target=start, daemon=True)
    worker.start()
    finished = done.wait(20)
    if not finished:  # before: blocked in the read; a writer's EOF lets the thread end
        with open(fifo, "wb"):
            pass
        worker.join(20)
    assert finished, "a FIFO named .intent-* blocked the start"
    assert fifo.exists() and (folder / ".intent-link").is_symlink()  # left as they are


def test_two_starts_at_once_issue_a_lost_certificate_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first start has found the certificate missing and is about to write it when a second
    start (another command on the folder) runs: that one must leave the intent to it."""
    ledger, folder, key, fact = world(tmp_path)
    intent(folder, fact)
    real = intents.recovered
    first_found, second_done = threading.Event(), threading.Event()

    def paused(*args: Any, **kw: Any) -> Any:
        out = real(*args, **kw)
        if threading.current_thread().name == "first":
            first_found.set()
            assert second_done.wait(20)
        return out

    monkeypatch.setattr(intents, "recovered", paused)
    first = threading.Thread(target=resume, args=(ledger, folder, key), name="first")
    first.start()
    try:
        assert first_found.wait(20)
        resume(ledger, folder, key)
    finally:
        second_done.set()
        first.join(20)
    kept = certificates(folder)
    assert [p.name for p in kept] == [f"{fact}.json"], kept  # before: and <fact>.2.json
    assert list(folder.glob(".intent-*")) == []


def test_review_out_never_writes_over_the_receipts(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parent / "extras"))
    from gatewaysim import Gateway, seeded
    from worked import E1, F1, wire_fact, write_result

    from agent_custody_state.ledger.model import AssertEvent, Fact

    receipts = tmp_path / "r"  # the pages folder of ``--out tmp_path``
    receipts.mkdir()
    rid = "aaaaaaaa-0000-4000-8000-00000000000a"
    fact = wire_fact(F1, "plan", "SECRET-PLAN", rid, "2026-09-01T10:00:00.010Z")
    args = {"subject": "acct:42", "predicate": "plan", "value": "SECRET-PLAN", "space": "org"}
    Gateway(receipts, seeded(1), seeded(2)).call(
        rid, "2026-09-01T10:00:00.000Z", "memory.write", args, write_result(fact, E1)
    )
    ledger = tmp_path / "ledger.jsonl"
    with Ledger(ledger) as book:
        book.import_events([AssertEvent(E1, fact["validFrom"], Fact.from_dict(fact))])
        book.forget(fact_id=F1, actor="user:admin", reason="erasure request")
    signed = {p.name: p.read_bytes() for p in receipts.iterdir()}
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(
            ["review", "--receipts", str(receipts), "--ledger", str(ledger), "--out", str(tmp_path)]
        )
    assert code == 1 and "is the receipts directory" in err.getvalue(), err.getvalue()
    assert {p.name: p.read_bytes() for p in receipts.iterdir()} == signed  # before: redacted
    assert not (tmp_path / "index.html").exists()


def test_a_retried_forget_never_certifies_the_first_requests_forget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two requests to forget one fact in flight at once (a client's retry): the second is
    refused as already forgotten while the first's certificate is still being made. Before, the
    second's intent issued a ``recovered`` certificate of the first's forget, saying a process
    had stopped, and the first one's full certificate went to ``.2.json``."""
    folder = tmp_path / "certs"
    folder.mkdir()
    key, _, _ = generate_key_pair(tmp_path / "k.key")
    real_intend, real_leave, real_keep = Custody._intend_one, Custody._leave, Custody._keep
    outcomes: list[str] = []
    with Ledger(tmp_path / "l.jsonl") as book:
        fact = book.assert_fact(subject="u", value="x@example.org", **FACT).fact.fact_id
        custody = Custody(book, certificate_key=str(key), certificates=folder)

        async def both() -> None:
            both_intended, second_done = anyio.Event(), anyio.Event()
            recorded: list[Any] = []

            async def intend(self: Custody, *args: Any) -> Any:
                recorded.append(await real_intend(self, *args))
                if len(recorded) == 2:
                    both_intended.set()
                return recorded[-1]

            async def leave(self: Custody, *args: Any, **kw: Any) -> Any:
                await both_intended.wait()  # both requests have recorded their intents
                return await real_leave(self, *args, **kw)

            async def keep(self: Custody, fact_id: str, certificate: Any) -> Any:
                await second_done.wait()  # the first's certificate is made after the second ends
                return await real_keep(self, fact_id, certificate)

            monkeypatch.setattr(Custody, "_intend_one", intend)
            monkeypatch.setattr(Custody, "_leave", leave)
            monkeypatch.setattr(Custody, "_keep", keep)

            async def one() -> None:
                try:
                    await custody.forget(fact_id=fact, actor="dpo", reason="gdpr")
                    outcomes.append("forgot")
                except Exception as exc:
                    outcomes.append(getattr(exc, "code", "?"))
                    second_done.set()

            async with anyio.create_task_group() as group:
                group.start_soon(one)
                group.start_soon(one)

        anyio.run(both)
    assert sorted(outcomes) == ["already_forgotten", "forgot"]
    [kept] = certificates(folder)  # before: a recovered <fact>.json and the full <fact>.2.json
    assert kept.name == f"{fact}.json" and "recovered" not in predicate(kept)
    assert list(folder.glob(".intent-*")) == []


def test_a_ledger_clock_behind_the_wall_never_loses_a_certificate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A certificate the disk refused is issued at the next start, also for a ledger on its own
    clock (SPEC 7): the intent's time is the ledger's, which stamps the forget. Before, it was
    the wall clock's, every forget read as older than its intent, and the intent was dropped."""
    from datetime import UTC, datetime

    from agent_custody_state.stores import archive

    folder = tmp_path / "certs"
    folder.mkdir()
    key, _, _ = generate_key_pair(tmp_path / "k.key")
    ledger = tmp_path / "l.jsonl"

    def clock() -> datetime:
        return datetime(2026, 1, 1, tzinfo=UTC)

    real = archive.write_new

    def full(path: Path, data: bytes, **kw: Any) -> None:
        if path.suffix == ".json":
            raise OSError(28, "No space left on device")
        real(path, data, **kw)

    with Ledger(ledger, clock=clock) as book:
        fact = book.assert_fact(subject="u", value="x@example.org", **FACT).fact.fact_id
        custody = Custody(book, certificate_key=str(key), certificates=folder)
        with monkeypatch.context() as patched:
            patched.setattr(archive, "write_new", full)
            anyio.run(lambda: custody.forget(fact_id=fact, actor="dpo", reason="gdpr"))
    assert certificates(folder) == [] and len(list(folder.glob(".intent-*"))) == 1
    with Ledger(ledger, clock=clock) as book:
        anyio.run(Custody(book, certificate_key=str(key), certificates=folder).resume)
    [kept] = certificates(folder)  # before: none, and the intent dropped
    assert predicate(kept)["fact"]["factId"] == fact


def test_the_sweep_counts_only_its_own_certificates_not_kept(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A certificate the start's intent finishing could not keep is not this sweep's: the
    intent stays for the next start, and it was never printed, so the sweep must not say so."""
    from types import SimpleNamespace

    from agent_custody_state.cli.sweep_unfinished import not_kept

    swept = SimpleNamespace(event=SimpleNamespace(fact_id="mine"), certificate={"c": 1})
    report = SimpleNamespace(forgotten=[swept])
    archive = SimpleNamespace(not_kept=["from-the-start"], folder="certs")
    assert not_kept(report, archive, printed=False) == ""
    archive.not_kept.append("mine")
    said = not_kept(report, archive, printed=False)
    assert "1 certificate could not be kept" in said and "mine" in said
    assert "from-the-start" not in said
    assert '"c": 1' in capsys.readouterr().out  # its own, printed

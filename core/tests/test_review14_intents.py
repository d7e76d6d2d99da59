"""The fourteenth review: an erasure intent and its forget matched by position, not by clock.

An intent (``stores.intents``) records, before a forget, that its certificate is owed; the next
start issues it for a fact the ledger shows forgotten by that request *after* the intent. After
was decided by time (the intent's ``at`` against the forget's ``txTime``), which failed twice:
- a clock stepped back between the intent and its forget: the forget read as older than the
  intent, and a kill (or a full disk) lost its certificate for good;
- a forget committed just before the intent, in the same millisecond, by the same actor and
  reason, read as after it, and was certified as the intent's own.
The intent now records where the ledger stood (its events then); a forget whose chain ``seq``
is past it is after it. An intent written without it (an older version) keeps the time rule.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state import Ledger
from agent_custody_state.server.signing import generate_key_pair
from agent_custody_state.stores import archive, intents
from agent_custody_state.stores.flows import Custody

FACT: dict[str, Any] = {"predicate": "email", "space": "org", "actor": "a"}
BASE = datetime(2026, 1, 1, tzinfo=UTC)


class Clock:
    """A ledger's clock (``Ledger(clock=...)``) the test sets."""

    def __init__(self) -> None:
        self.at = BASE

    def __call__(self) -> datetime:
        return self.at


def certificates(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.json"))


def predicate(path: Path) -> dict[str, Any]:
    envelope = json.loads(path.read_bytes())
    return json.loads(base64.b64decode(envelope["payload"]))["predicate"]  # type: ignore[no-any-return]


def refusing_certificates(monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk refuses every certificate (as a kill before it is kept); intents are written."""
    real = archive.write_new

    def full(path: Path, data: bytes, **kw: Any) -> None:
        if path.suffix == ".json":
            raise OSError(28, "No space left on device")
        real(path, data, **kw)

    monkeypatch.setattr(archive, "write_new", full)


@pytest.mark.parametrize("where", ["jsonl", "memory"])
def test_a_clock_stepped_back_between_intent_and_forget_loses_no_certificate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The ledger's clock steps back 5 s between the intent and its forget, and the certificate
    is not kept: the next start issues it. Before, the forget read as older than its intent,
    the intent was dropped, and the certificate was lost for good."""
    folder = tmp_path / "certs"
    folder.mkdir()
    key, _, _ = generate_key_pair(tmp_path / "k.key")
    clock = Clock()
    location = str(tmp_path / "l.jsonl") if where == "jsonl" else "memory:"
    recorded = intents.record

    def record(*args: Any, **kw: Any) -> intents.Intent | None:
        made = recorded(*args, **kw)
        clock.at = BASE + timedelta(seconds=5)  # stepped back from 10 s, before the forget
        return made

    book = Ledger(location, clock=clock)
    try:
        fact = book.assert_fact(subject="u", value="x@example.org", **FACT).fact.fact_id
        clock.at = BASE + timedelta(seconds=10)
        custody = Custody(book, certificate_key=str(key), certificates=folder)
        with monkeypatch.context() as patched:
            patched.setattr(intents, "record", record)
            refusing_certificates(patched)
            anyio.run(lambda: custody.forget(fact_id=fact, actor="dpo", reason="gdpr"))
        [left] = folder.glob(".intent-*")
        assert json.loads(left.read_text())["at"] > book.backend.events_for([fact])[-1].tx_time
        assert certificates(folder) == []
        if where == "jsonl":  # the next start: the ledger opened again
            book.close()
            book = Ledger(location, clock=clock)
        anyio.run(Custody(book, certificate_key=str(key), certificates=folder).resume)
    finally:
        book.close()
    [kept] = certificates(folder)  # before: none, and the intent dropped
    assert predicate(kept)["fact"]["factId"] == fact and "recovered" in predicate(kept)
    assert list(folder.glob(".intent-*")) == []


def test_a_forget_just_before_the_intent_is_not_its_own(tmp_path: Path) -> None:
    """A fact forgotten without a certificate by ``dpo``/``gdpr``; in the same millisecond, a
    second request of theirs records its intent and is killed before its forget (which the
    ledger would refuse: already forgotten). The next start certifies nothing: that forget is
    not the intent's. Before, its time (not older than the intent's) made it so, and a
    ``recovered`` certificate said a forget had been made under this intent."""
    folder = tmp_path / "certs"
    folder.mkdir()
    key, _, _ = generate_key_pair(tmp_path / "k.key")
    ledger = tmp_path / "l.jsonl"
    clock = Clock()  # one millisecond throughout
    with Ledger(ledger, clock=clock) as book:
        fact = book.assert_fact(subject="u", value="x@example.org", **FACT).fact.fact_id
        anyio.run(lambda: Custody(book).forget(fact_id=fact, actor="dpo", reason="gdpr"))
        custody = Custody(book, certificate_key=str(key), certificates=folder)
        options = custody._certificate_options(True)
        made = custody._intend([fact], "dpo", "gdpr", None, options)
        assert made is not None
        intents._LIVE.discard(made.path)  # its process killed here, before its forget
    with Ledger(ledger, clock=clock) as book:
        anyio.run(Custody(book, certificate_key=str(key), certificates=folder).resume)
    assert certificates(folder) == []  # before: a recovered certificate of the other's forget
    assert list(folder.glob(".intent-*")) == []  # its forget never committed: dropped


def old_intent(folder: Path, fact: str, at: str, **over: Any) -> Path:
    """An intent a killed process of an older version left: no ``position``."""
    body = {
        "kind": intents.KIND,
        "facts": [fact],
        "request": {"actor": "dpo", "reason": "gdpr", "receiptId": None},
        "at": at,
        "stored": {},
        "owner": {},
        **over,
    }
    path = folder / ".intent-left"
    path.write_text(json.dumps(body))
    return path


def forgotten_uncertified(tmp_path: Path) -> tuple[Path, Path, Path, str]:
    """A ledger on its clock, one fact forgotten at 10 s by ``dpo``/``gdpr``, none certified."""
    ledger, folder = tmp_path / "l.jsonl", tmp_path / "certs"
    folder.mkdir()
    key, _, _ = generate_key_pair(tmp_path / "k.key")
    clock = Clock()
    with Ledger(ledger, clock=clock) as book:
        fact = book.assert_fact(subject="u", value="x@example.org", **FACT).fact.fact_id
        clock.at = BASE + timedelta(seconds=10)
        anyio.run(lambda: Custody(book).forget(fact_id=fact, actor="dpo", reason="gdpr"))
    return ledger, folder, Path(key), fact


def resume(ledger: Path, folder: Path, key: Path) -> None:
    with Ledger(ledger) as book:
        anyio.run(Custody(book, certificate_key=str(key), certificates=folder).resume)


def test_an_intent_without_a_position_keeps_the_time_rule(tmp_path: Path) -> None:
    """An intent an older version wrote (no ``position``) is still finished, by its time: one
    recorded before the forget gets its certificate; one recorded after it gets none."""
    ledger, folder, key, fact = forgotten_uncertified(tmp_path)
    later = old_intent(folder, fact, "2026-01-01T00:00:11.000Z")
    resume(ledger, folder, key)
    assert certificates(folder) == [] and not later.exists()  # the forget is older: not its
    old_intent(folder, fact, "2026-01-01T00:00:09.000Z")
    resume(ledger, folder, key)
    [kept] = certificates(folder)
    assert predicate(kept)["fact"]["factId"] == fact and "recovered" in predicate(kept)


@pytest.mark.parametrize("position", [-1, "0", True, 1.5, [0]])
def test_an_intent_whose_position_is_not_a_count_is_left(
    tmp_path: Path, position: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """An intent is unsigned: a position that is not a number of events is not trusted (it is
    logged and left, as a time that is not a time). Before, it was not read at all, and the
    time alone certified the forget."""
    ledger, folder, key, fact = forgotten_uncertified(tmp_path)
    left = old_intent(folder, fact, "2026-01-01T00:00:09.000Z", position=position)
    resume(ledger, folder, key)
    assert certificates(folder) == [] and left.exists()
    assert "is not a number of events" in caplog.text

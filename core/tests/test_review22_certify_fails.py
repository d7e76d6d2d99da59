"""Twenty-second review: a certificate that fails after its forget committed says the forget
stands (``ledger.certifying.CertificateNotMade``).

Before, the failure's own error came out alone (``[Errno 13] Permission denied: ...`` from the
byte scan; over MCP only ``internal error in memory.forget: PermissionError``): a caller could
think nothing had happened and retry, or believe the value was still there. Now every path
(``Ledger.forget``, ``Ledger.sweep``, the ``memory.forget`` tool, the ``forget`` command) says
which facts are forgotten by which forget events, what failed, and what can be done; the
failure is the error's cause.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state import Ledger
from agent_custody_state.cli import main
from agent_custody_state.ledger import certifying
from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state.ledger.certifying import CertificateNotMade
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.server.service import MemoryService
from agent_custody_state.server.signing import generate_key_pair
from agent_custody_state.stores.archive import CertificateArchive

FACT: dict[str, Any] = {"space": "o", "subject": "s", "predicate": "p", "actor": "a"}
SECRET = "fay.review22+secret@example.org"
DENIED = PermissionError(13, "Permission denied", "/data/ledger.jsonl")


@pytest.fixture
def failing_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    """The byte scan's file lookup fails (a file it may not read), after the forget."""

    def scan(*_: Any, **__: Any) -> Any:
        raise DENIED

    monkeypatch.setattr(certifying, "scan_files", scan)


def stands(text: str, fact_id: str, event_id: str) -> None:
    """``text`` says the forget of ``fact_id`` (event ``event_id``) stands, why the
    certificate is missing, and what can be done."""
    assert f"fact {fact_id} (forget event {event_id}) is forgotten" in text, text
    assert "its erasure certificate could not be made: [Errno 13] Permission denied" in text
    assert "The forget stands" in text and "do not forget again" in text, text
    assert 'certificates folder (certificates = "DIR")' in text
    assert SECRET not in text


def forget_event_id(ledger: Ledger, fact_id: str) -> str:
    return ledger.history(fact_id)[-1].event_id


@pytest.mark.usefixtures("failing_scan")
def test_a_failed_certificate_says_the_forget_stands(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.jsonl", checkpoint_key=Ed25519PrivateKey.generate()) as led:
        fact = led.assert_fact(**FACT, value=SECRET).fact.fact_id
        with pytest.raises(CertificateNotMade) as caught:
            led.forget(fact_id=fact, actor="a", reason="r", certificate=True)
        event_id = forget_event_id(led, fact)
        stands(str(caught.value), fact, event_id)
        assert caught.value.__cause__ is DENIED  # the failure itself is kept
        assert [e.event_id for e in caught.value.events] == [event_id]
        assert isinstance(caught.value, EventBackendError)  # not a refusal: something changed
        assert not isinstance(caught.value, LedgerError)
        assert led.status(fact) == ("forgotten", False)
        with pytest.raises(LedgerError) as again:
            led.forget(fact_id=fact, actor="a", reason="r", certificate=True)
        assert again.value.code == "already_forgotten"


def test_a_failure_that_is_not_io_is_named_by_its_type_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another error's text might quote the value: only its type is in the message."""

    def scan(*_: Any, **__: Any) -> Any:
        raise ValueError(f"cannot scan for {SECRET!r}")

    monkeypatch.setattr(certifying, "scan_files", scan)
    with Ledger(tmp_path / "l.jsonl", checkpoint_key=Ed25519PrivateKey.generate()) as led:
        fact = led.assert_fact(**FACT, value=SECRET).fact.fact_id
        with pytest.raises(CertificateNotMade) as caught:
            led.forget(fact_id=fact, actor="a", reason="r", certificate=True)
    assert "could not be made: ValueError. The forget stands" in str(caught.value)
    assert SECRET not in str(caught.value)


@pytest.mark.usefixtures("failing_scan")
def test_a_sweep_names_every_fact_it_forgot(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.jsonl", checkpoint_key=Ed25519PrivateKey.generate()) as led:
        facts = [led.assert_fact(**FACT, value=f"{SECRET}{i}").fact.fact_id for i in range(7)]
        with pytest.raises(CertificateNotMade) as caught:
            led.sweep(before="2999-01-01T00:00:00Z", actor="a", reason="r", certificates=True)
        text = str(caught.value)
        assert {e.fact_id for e in caught.value.events} == set(facts)
        assert (
            text.startswith("facts ") and " are forgotten, but their erasure certificates " in text
        )
        assert text.count("(forget event ") == certifying.NAMED
        assert f"and {7 - certifying.NAMED} more (the error's events)" in text
        assert "The forgets stand: the values are erased" in text
        assert all(led.status(f) == ("forgotten", False) for f in facts)


@pytest.mark.usefixtures("failing_scan")
def test_the_memory_forget_tool_says_the_same(tmp_path: Path) -> None:
    """``memory.forget`` with a certificate: the same text (before: ``internal error in
    memory.forget: PermissionError``); with a certificates folder a recovered certificate is
    kept there, as the text says."""
    folder = tmp_path / "certs"
    CertificateArchive(folder).prepare()
    with Ledger(tmp_path / "l.jsonl") as led:
        fact = led.assert_fact(**FACT, value=SECRET).fact.fact_id
        service = MemoryService.build(
            led, require_gateway=False, identity=Ed25519PrivateKey.generate(), certificates=folder
        )
        try:
            arguments = {"factId": fact, "reason": "r", "certificate": True}
            result = anyio.run(service.call, "memory.forget", arguments, None, "direct")
        finally:
            service.close()
        assert result.is_error
        stands(result.texts[0], fact, forget_event_id(led, fact))
    [kept] = folder.glob("*.json")
    predicate = json.loads(base64.b64decode(json.loads(kept.read_bytes())["payload"]))
    assert predicate["predicate"]["outcome"] == "partial" and "recovered" in predicate["predicate"]


@pytest.mark.usefixtures("failing_scan")
def test_the_forget_command_says_the_same(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger, out = tmp_path / "l.jsonl", tmp_path / "cert.json"
    key, _, _ = generate_key_pair(tmp_path / "k")
    with Ledger(ledger) as led:
        fact = led.assert_fact(**FACT, value=SECRET).fact.fact_id
    argv = ["forget", "--ledger", str(ledger), "--fact", fact, "--reason", "r"]
    assert main([*argv, "--certificate", str(out), "--key", str(key)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.splitlines()) == 1, err
    with Ledger(ledger) as led:
        stands(err, fact, forget_event_id(led, fact))
    assert not out.exists()

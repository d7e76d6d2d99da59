"""Twenty-second review: on SQLite, a certificate whose file lookup fails after the forget
committed says the forget stands (``ledger.certifying.CertificateNotMade``), with the backend's
own text; the row is forgotten in the table, and a crypto-shred forget's key destroyed."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state import Ledger
from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state.ledger.certifying import CertificateNotMade
from agent_custody_state_events_sqlite.store import SqliteBackend

SECRET = "gil.review22+sqlite@example.org"
FACT: dict[str, Any] = {"space": "o", "subject": "s", "predicate": "p", "actor": "a"}


@pytest.mark.parametrize("mode", ["plain", "crypto-shred"])
def test_a_failed_file_lookup_says_the_forget_stands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    def lookup(self: SqliteBackend) -> list[str]:
        raise EventBackendError(f"{self.location}: the files could not be listed")

    path = tmp_path / "l.sqlite"
    key = Ed25519PrivateKey.generate()
    with Ledger(path, checkpoint_key=key, forget_mode=mode) as led:
        fact = led.assert_fact(**FACT, value=SECRET).fact.fact_id
        monkeypatch.setattr(SqliteBackend, "local_files", lookup)
        with pytest.raises(CertificateNotMade) as caught:
            led.forget(fact_id=fact, actor="a", reason="r", certificate=True)
        [event] = caught.value.events
        assert led.status(fact) == ("forgotten", False)
        assert led.history(fact)[-1].event_id == event.event_id
    text = str(caught.value)
    assert text.startswith(f"fact {fact} (forget event {event.event_id}) is forgotten, but ")
    assert f"could not be made: {path}: the files could not be listed. The forget stands" in text
    assert isinstance(caught.value.__cause__, EventBackendError)
    with sqlite3.connect(path) as conn:
        kinds = [row[0] for row in conn.execute("SELECT kind FROM events ORDER BY seq")]
    assert kinds == ["assert", "forget"]
    assert SECRET.encode() not in path.read_bytes()

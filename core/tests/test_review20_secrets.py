"""Twentieth review, part 2: secrets and values in reprs, tracebacks and internal errors.

A ``repr`` is printed by debuggers, test failures and a program's own ``log.debug("%r", ...)``;
a tool result is kept (signed) by the gateway; a traceback goes to the server's log. None of
them may carry a bearer token, a URL's password or a fact's value, and ``certificate="no"``
must not ask for a certificate.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state import AssertEvent, AssertRequest, Ledger, LedgerError
from agent_custody_state.backends.memory import MemoryBackend
from agent_custody_state.cli.logs import configure_logging
from agent_custody_state.config import load_config
from agent_custody_state.ledger.model import Event
from agent_custody_state.server.guard import BearerToken, normalize_tokens
from agent_custody_state.server.service import MemoryService
from agent_custody_state.stores import StoreSet
from agent_custody_state.stores.base import guard_logger
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.withheld import MASK, withholding

TOKEN = "tok-3f9a1c7e5b2d4068a1f0"
PASSWORD = "pw-7Qx2Lm9Rk"
SECRET = "diagnosis HIV positive, SSN 123-45-6789"


# -- reprs ------------------------------------------------------------------------------------


def test_a_bearer_tokens_repr_does_not_show_its_value() -> None:
    tokens = normalize_tokens([TOKEN, BearerToken(TOKEN + "-reader", "reader")])
    for text in (repr(tokens), str(tokens[0]), repr(tokens[1])):
        assert TOKEN not in text
        assert "gateway-1" in text or "reader-2" in text  # the label still names it


def test_a_token_given_in_place_of_its_role_is_not_quoted() -> None:
    """``{role: token}`` for ``{token: role}`` put the token into the error text."""
    with pytest.raises(ValueError, match="role must be") as caught:
        normalize_tokens({"gateway": TOKEN})
    assert TOKEN not in str(caught.value)
    assert f"{len(TOKEN)} characters, not shown" in str(caught.value)
    with pytest.raises(ValueError, match="got 'gatway'"):  # a short typo is still quoted
        normalize_tokens({TOKEN: "gatway"})


def test_the_configurations_repr_shows_no_password(monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"postgresql://app:{PASSWORD}@db.internal/custody"
    monkeypatch.setenv("AGENT_CUSTODY_LEDGER", url)
    store = {
        "name": "m",
        "type": "mem0",
        "host": f"https://proxy:{PASSWORD}@mem0.internal",
        "local_config": {"vector_store": {"dsn": f"host=db password={PASSWORD}"}},
    }
    config = load_config(stores=[store])
    for text in (repr(config), str(config), repr(config.stores[0]), repr(config.server)):
        assert PASSWORD not in text
    assert "postgresql://app:***@db.internal/custody" in repr(config)
    assert "password=***" in repr(config.stores[0])
    assert config.ledger == url  # only the display is masked
    assert config.stores[0].settings()["host"] == store["host"]


# -- internal errors ----------------------------------------------------------------------------


class Quoting(MemoryBackend):
    """A backend whose driver quotes the rows it refuses (psycopg's ``DataError`` does), with
    the driver's error as the cause of the one raised."""

    def append(self, events: Sequence[Event]) -> None:
        values = [e.fact.value for e in events if isinstance(e, AssertEvent)]
        try:
            raise ValueError(f"invalid input: {values!r}")
        except ValueError as exc:
            raise RuntimeError(f"row refused: {json.dumps(values)}") from exc


def _failed_write(caplog: pytest.LogCaptureFixture) -> tuple[list[str], list[logging.LogRecord]]:
    service = MemoryService.build(Ledger(Quoting()), require_gateway=False)
    args = {"subject": "s", "predicate": "p", "value": SECRET, "space": "org", "actor": "a"}
    with caplog.at_level(logging.ERROR, logger="agent_custody_state.server.service"):
        result = anyio.run(service.call, "memory.write", args, None, "direct")
    assert result.is_error
    return result.texts, [r for r in caplog.records if r.getMessage() == "memory.write failed"]


def test_an_internal_error_tells_the_caller_no_value(caplog: pytest.LogCaptureFixture) -> None:
    texts, _ = _failed_write(caplog)
    assert texts == [
        "internal error in memory.write: RuntimeError (the server's log has the details)"
    ]


def test_an_internal_errors_traceback_is_logged_without_the_value(
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, [record] = _failed_write(caplog)
    logged = caplog.text
    assert "HIV" not in logged and "123-45-6789" not in logged
    trace = record.exc_text or ""
    assert trace.startswith("Traceback (most recent call last):\n")
    assert "direct cause of the following exception" in trace
    assert f"ValueError: invalid input: ['{MASK}']" in trace  # the cause, masked too
    assert trace.endswith(f'RuntimeError: row refused: ["{MASK}"]')
    assert 'File "' in trace and "in append" in trace  # the frames are kept


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_the_servers_log_prints_the_masked_traceback(fmt: str) -> None:
    stream = io.StringIO()
    configure_logging("info", fmt, stream)
    service = MemoryService.build(Ledger(Quoting()), require_gateway=False)
    args = {"subject": "s", "predicate": "p", "value": SECRET, "space": "org", "actor": "a"}
    anyio.run(service.call, "memory.write", args, None, "direct")
    out = stream.getvalue()
    assert "HIV" not in out and "123-45-6789" not in out
    if fmt == "json":
        [failed] = [json.loads(line) for line in out.splitlines() if "failed" in line]
        out = failed["traceback"]
    assert "Traceback (most recent call last):" in out and "RuntimeError: row refused" in out


# -- withholding --------------------------------------------------------------------------------


def test_a_guarded_loggers_records_hide_the_values_being_sent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    name = "review20.vendor.sdk"
    guard_logger(name)
    sdk = logging.getLogger(name)
    text = f"s p: {SECRET}"
    with caplog.at_level(logging.DEBUG, logger=name):
        with withholding(text, SECRET):
            sdk.debug(f"Creating memory with data={text!r}")
            sdk.info("stored %s", json.dumps({"memory": text}))
        sdk.debug(f"after the send: {SECRET}")  # no longer being sent: as logged
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        f"Creating memory with data='{MASK}'",
        f'stored {{"memory": "{MASK}"}}',
        f"after the send: {SECRET}",
    ]


# -- certificate= -------------------------------------------------------------------------------


def _ledger_with_fact(path: Path) -> tuple[Ledger, str]:
    ledger = Ledger(path)
    event = ledger.assert_fact(
        AssertRequest(subject="s", predicate="p", value="v", space="org", actor="a")
    )
    return ledger, event.fact.fact_id


@pytest.mark.parametrize("certificate", ["no", "", 0, 1, "False"])
def test_forget_refuses_a_certificate_that_is_not_a_bool(tmp_path: Path, certificate: Any) -> None:
    path = tmp_path / "l.jsonl"
    ledger, fact_id = _ledger_with_fact(path)
    before = path.read_bytes()
    with pytest.raises(LedgerError, match="certificate must be True, False or a Cert") as caught:
        ledger.forget(fact_id=fact_id, actor="a", reason="r", certificate=certificate)
    assert caught.value.field == "certificate"
    assert path.read_bytes() == before
    ledger.forget(fact_id=fact_id, actor="a", reason="r", certificate=None)  # None: no certificate
    ledger.close()


def test_the_custody_forget_refuses_it_too(tmp_path: Path) -> None:
    """``certificate or <archive configured>`` took ``""`` and ``0`` for False, silently."""
    path = tmp_path / "l.jsonl"
    ledger, fact_id = _ledger_with_fact(path)
    custody = Custody(ledger, StoreSet([]))
    before = path.read_bytes()
    for certificate in ("no", ""):
        with pytest.raises(LedgerError, match="certificate must be") as caught:
            anyio.run(
                lambda c=certificate: custody.forget(
                    fact_id=fact_id, actor="a", reason="r", certificate=c
                )
            )
        assert caught.value.field == "certificate"
    assert path.read_bytes() == before
    ledger.close()

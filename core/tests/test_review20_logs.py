"""Twentieth review: what log records and error texts carry (values, URL queries, forged lines).

A log line, a tool's error text or a report is copied where no forget reaches; a store's failure
quoting the fact (a vendor's 422 echoing the ``input``, an SDK printing the reply with ``repr``)
must not carry the value there, nor a URL query (httpx logs each request's URL at INFO), and one
call must not forge extra lines or flood the server's log.
"""

from __future__ import annotations

import io
import logging
from pathlib import Path

import anyio
import httpx
import pytest

from agent_custody_state import AssertRequest, Ledger
from agent_custody_state.canonical import js_json
from agent_custody_state.cli.logs import MAX_MESSAGE, configure_logging
from agent_custody_state.ledger.model import Fact
from agent_custody_state.stores import StoreSet, VerifyPolicy
from agent_custody_state.stores.base import StoreError, error_message, fact_text
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore
from agent_custody_state.stores.storeset import StoreWriteError
from agent_custody_state.stores.withheld import LIMIT, withheld

SECRET = 'diagnosis "HIV positive"\nSSN 123-45-6789 Zürich'


class Echoing(InProcessStore):
    """A store whose vendor quotes the request in its errors, as FastAPI's 422 and the
    Stainless SDKs do: ``put`` fails when ``refuse`` is set, ``remove`` when ``unremovable``
    is, the removal check always."""

    refuse = False
    unremovable = False

    async def put(self, fact: Fact) -> str:
        if self.refuse:
            body = {"detail": [{"type": "string_too_long", "input": fact_text(fact)}]}
            raise StoreError(self.name, f"add failed: Error code: 422 - {body!r}")
        return await super().put(fact)

    async def remove(self, external_id: str, fact: Fact) -> None:
        if self.unremovable:
            raise StoreError(self.name, f'delete failed: 409 {{"memory": {js_json(fact.value)}}}')
        await super().remove(external_id, fact)

    async def verify_removed(self, external_id: str, fact: Fact) -> bool:
        url = httpx.URL("https://vendor.example/search", params={"query": fact_text(fact)})
        raise StoreError(self.name, f"search failed: 500 for url '{url}'")


def leaks(texts: list[str]) -> list[str]:
    """The texts holding the secret, or a part of it, in any form a vendor quotes it in."""
    forms = ("HIV positive", "123-45-6789", "HIV+positive", "Z%C3%BCrich", "Z\\u00fcrich")
    return [t for t in texts if any(form in t for form in forms)]


def test_a_vendor_error_echoing_the_value_reaches_no_log_or_error_text(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store, stuck = Echoing("echo"), Echoing("stuck")

    async def scenario() -> list[str]:
        with Ledger(tmp_path / "l.jsonl") as ledger:
            custody = Custody(ledger, StoreSet([store, stuck], VerifyPolicy(1, 0)))
            request = AssertRequest(subject="s", predicate="p", value=SECRET, space="o", actor="a")
            store.refuse = True
            with pytest.raises(StoreWriteError) as refused:
                await custody.write(request)
            store.refuse, stuck.unremovable = False, True
            written = await custody.write(request)
            forgotten = await custody.forget(
                fact_id=written.event.fact.fact_id, actor="a", reason="r"
            )
            return [str(refused.value), repr(forgotten.removal)]

    with caplog.at_level(logging.DEBUG):
        texts = anyio.run(scenario)
    logged = [r.getMessage() for r in caplog.records]
    assert all(any(word in t for t in logged) for word in ("422", "search failed", "409"))
    assert "[value withheld]" in texts[0] and "[value withheld]" in texts[1]
    assert leaks(texts + logged) == []


def test_a_cut_short_or_huge_echo_is_masked_and_bounded() -> None:
    value = "SSN 123-45-6789 " * 200_000  # 3.2 MB
    echo = f"refused: {{'input': {value[:500]!r}...}} {'y' * 1_000_000}"
    shown = withheld(echo, f"s p: {value}", value)
    assert "123-45-6789" not in shown and "[value withheld]" in shown
    assert len(shown) < LIMIT + 100 and shown.endswith("more characters)")
    assert error_message(StoreError("s", echo)).endswith("more characters)")


def test_httpx_request_lines_carry_no_url_query(caplog: pytest.LogCaptureFixture) -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=[]))
    with caplog.at_level(logging.INFO, "httpx"), httpx.Client(transport=transport) as client:
        client.get("https://vendor.example/search", params={"query": SECRET})
    lines = [r.getMessage() for r in caplog.records if r.name == "httpx"]
    assert lines and all("search?***" in line for line in lines)
    assert leaks(lines) == []


def test_a_logged_newline_or_megabyte_stays_one_bounded_line() -> None:
    stream = io.StringIO()
    logger = logging.getLogger("agent_custody_state.stores.storeset")
    try:
        configure_logging("info", "text", stream)
        forged = "boom\n2026-01-01T00:00:00.000Z INFO access memory.forget gateway ok\x1b[2J"
        logger.warning("store %s refused: %s", "s", forged + "z" * 1_000_000)
    finally:
        configure_logging("warning", "text", io.StringIO())
    out = stream.getvalue()
    assert out.count("\n") == 1 and "\x1b" not in out
    assert "boom\\n2026" in out and "\\u001b[2J" in out
    assert len(out) < MAX_MESSAGE + 200 and "more characters)" in out

"""A forget whose certificate fails and whose store still holds the value says so (twenty-
second review, second wave).

Since this review's fix, ``Custody.forget`` goes on to the stores after a ``CertificateNotMade``
and raises it after: its text says "the value is erased", and nothing else. When a store's
removal failed, that is false of the store: ``memory.forget`` (and the ``forget`` command)
answered only the ledger's words, while a forget whose certificate was made answers "erased
from the ledger, but still held by <store>: <why>". The error now names the stores still
holding the value, with the reason each gave.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state import Ledger
from agent_custody_state.ledger import certifying
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.server.service import MemoryService
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore

SECRET = "gil.review22-second+secret@example.org"


def test_memory_forget_names_the_store_that_still_holds_the_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept, failing = InProcessStore("vec"), InProcessStore("graph")

    async def refuse(external_id: str, fact: Any) -> None:
        raise RuntimeError("graph is read-only")

    with Ledger(tmp_path / "l.jsonl") as ledger:
        request = AssertRequest(subject="s", predicate="p", value=SECRET, space="o", actor="a")
        fact_id = anyio.run(Custody(ledger, [kept, failing]).write, request).event.fact.fact_id
        failing.remove = refuse  # type: ignore[method-assign]

        def scan(*_: Any, **__: Any) -> Any:
            raise PermissionError(13, "Permission denied", "/data/ledger.jsonl")

        monkeypatch.setattr(certifying, "scan_files", scan)
        service = MemoryService.build(
            ledger,
            require_gateway=False,
            stores=[kept, failing],
            identity=Ed25519PrivateKey.generate(),
        )
        try:
            arguments = {"factId": fact_id, "reason": "r", "certificate": True}
            result = anyio.run(service.call, "memory.forget", arguments, None, "direct")
        finally:
            service.close()
        assert ledger.status(fact_id) == ("forgotten", False)
    assert result.is_error
    text = result.texts[0]
    assert "its erasure certificate could not be made" in text  # the ledger's account stays
    assert "still held by graph: " in text and "graph is read-only" in text
    assert "vec" not in text.split("still held by", 1)[1]  # removed: not named as holding it
    assert not kept.vendor.rows and len(failing.vendor.rows) == 1
    assert SECRET not in text

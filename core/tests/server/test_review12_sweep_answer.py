"""The twelfth review's follow-up, served: ``memory.sweep`` stopped part-way by a full disk says
what it forgot before it stopped, as the ``sweep`` command does (``stores.sweep_stopped``).

The disk fills for real: in a forked child whose ``RLIMIT_FSIZE`` leaves the JSONL ledger room
for one forget, not two (``test_review9_exhaust``'s technique, as ``test_review12_certs``).
Before, the answer was the ledger's error alone, "...; the ledger is unchanged", though the
first fact was forgotten. Now it is an error result (the reason first, the sweep's JSON of what
it did second, ``{"error", "partial"}`` structured, as a sweep a store could not finish), and
the certificates asked for are the full ones (not ``recovered``).
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import anyio

from agent_custody_state import Ledger
from agent_custody_state.server.outputs import output_schema
from agent_custody_state.server.service import MemoryService

sys.path.insert(0, str(Path(__file__).parent.parent))
from test_review9_exhaust import disk_full_past, in_child

FACT: dict[str, Any] = {"predicate": "email", "space": "org", "actor": "a"}
META = {"agent-custody/receipt": "rcpt-1", "agent-custody/agent": "agent-a"}


def _sweep_on_a_full_disk(folder: Path, key: str | None) -> dict[str, Any]:
    path = folder / "l.jsonl"
    with Ledger(path) as book:
        for n in range(4):
            book.assert_fact(subject=f"s{n}", value=f"v{n}.secret@example.org", **FACT)
    args: dict[str, Any] = {"reason": "retention", "before": "2999-01-01T00:00:00Z"}
    with Ledger(path) as book:
        service = MemoryService.build(book, identity=key)
        try:
            with disk_full_past(path.stat().st_size + 600):  # room for one forget, not two
                result = anyio.run(
                    service.call,
                    "memory.sweep",
                    {**args, "certificates": key is not None},
                    META,
                    "gateway",
                )
        finally:
            service.close()
        forgotten = [f.fact_id for f in book.facts() if f.forgotten is not None]
    return {
        "isError": result.is_error,
        "texts": result.texts,
        "structured": result.structured,
        "forgotten": forgotten,
    }


def test_a_sweep_stopped_by_a_full_disk_says_what_it_forgot(tmp_path: Path) -> None:
    got = in_child(_sweep_on_a_full_disk, tmp_path, None)
    [fact] = got["forgotten"]  # the disk took one forget
    assert got["isError"] is True
    message = got["texts"][0]
    assert message.startswith(f"the sweep stopped after forgetting 1 fact ({fact}; "), message
    assert "the ledger is unchanged" not in message  # before: the whole answer's last words
    assert "that fact is unchanged in the ledger" in message
    data = json.loads(got["texts"][1])
    assert [f["factId"] for f in data["forgotten"]] == [fact]
    assert got["structured"] == {"error": message, "partial": data}
    import jsonschema

    jsonschema.validate(got["structured"], output_schema("memory.sweep"))


def test_its_certificates_are_the_full_ones(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    got = in_child(_sweep_on_a_full_disk, tmp_path, str(keys[0]))
    [fact] = got["forgotten"]
    assert got["isError"] is True and len(got["texts"]) == 3
    certificates = json.loads(got["texts"][2])["certificates"]
    assert list(certificates) == [fact]
    assert certificates[fact] is not None  # before: none, the ledger certified after its last
    payload = json.loads(base64.b64decode(certificates[fact]["payload"]))
    predicate = payload["predicate"]
    assert "recovered" not in predicate  # made after the compaction, not from an intent
    assert predicate["verification"]["byteScan"]["hits"] == 0
    assert got["structured"]["partial"]["forgotten"][0]["certificate"] == certificates[fact]

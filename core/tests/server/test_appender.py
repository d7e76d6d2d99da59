"""Group commit: concurrent writes share a transaction, and still get a lone write's answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state import Ledger
from agent_custody_state.server.app import create_memory_server

pytestmark = pytest.mark.anyio
META = {"agent-custody/receipt": "r", "agent-custody/agent": "a"}


def write(**args: Any) -> dict[str, Any]:
    return {"subject": "acct:1", "predicate": "plan", "value": "pro", "space": "org", **args}


async def test_concurrent_writes_are_batched_and_each_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger(tmp_path / "l.jsonl")
    batches: list[int] = []
    original = ledger.assert_many

    def counting(items: Any) -> Any:
        items = list(items)
        batches.append(len(items))
        return original(items)

    monkeypatch.setattr(ledger, "assert_many", counting)
    service = create_memory_server(ledger).memory
    base = await service.call("memory.write", write(), META, "gateway")
    base_id = base.texts[0].split('"factId":"')[1].split('"')[0]
    results: dict[int, Any] = {}

    async def one(i: int) -> None:
        args = write(subject=f"other:{i}", value=i)
        if i in (3, 4):  # both try to supersede the same fact: one must win, one must lose
            args = write(value=i, supersedes=base_id)
        if i == 5:
            args = write(supersedes="unknown-fact")
        results[i] = await service.call("memory.write", args, META, "gateway")

    async with anyio.create_task_group() as tg:
        for i in range(30):
            tg.start_soon(one, i)
    assert max(batches, default=1) > 1, "no batch formed"
    errors = {i: r.texts[0] for i, r in results.items() if r.is_error}
    assert errors.pop(5) == "cannot supersede unknown fact unknown-fact"
    assert len(errors) == 1 and next(iter(errors.values())) == (
        f"fact {base_id} is already superseded"
    )
    assert ledger.count() == 1 + 29 - 1
    current = ledger.as_of(subject="acct:1")
    assert len(current) == 1 and current[0].value in (3, 4)
    service.close()
    ledger.close()

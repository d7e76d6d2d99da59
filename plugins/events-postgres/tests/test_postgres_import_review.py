"""Review of import into PostgreSQL: an import that fails part-way leaves no event (the batches
before the failure included), and a JSONL ledger moved in and out keeps every byte."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main
from agent_custody_state.ledger.model import event_from_json
from agent_custody_state_events_postgres.location import parse_location

pytestmark = pytest.mark.postgres


def _source(tmp_path: Path) -> Path:
    source = tmp_path / "src.jsonl"
    with Ledger(source) as ledger:
        ledger.assert_many(
            [
                {
                    "subject": f"s{i}",
                    "predicate": "p",
                    "value": {"t": f"\t{i}\\é"},
                    "space": "o",
                    "actor": "a",
                }
                for i in range(12)
            ]
        )
        first = ledger.facts()[0]
        ledger.forget(fact_id=first.fact_id, actor="a", reason="r")
    return source


def _json(url: str, table: str) -> list[str]:
    where = parse_location(f"{url}&table={table}")
    with psycopg.connect(where.connect_url.replace("postgresql+psycopg", "postgresql")) as conn:
        return [r[0] for r in conn.execute(f"SELECT json FROM {table} ORDER BY seq")]


def test_an_import_that_fails_part_way_leaves_nothing(postgres_url: str, tmp_path: Path) -> None:
    events = [event_from_json(line) for line in _source(tmp_path).read_text("utf-8").splitlines()]
    location = f"{postgres_url}&table=review_partial"
    with Ledger(location) as ledger:
        backend: Any = ledger.backend
        append = backend.append

        def failing(batch: Any) -> None:
            if backend.count() >= 10:
                raise OSError("the disk went away")
            append(batch)

        backend.append = failing
        with pytest.raises(OSError, match="went away"):
            ledger.import_events(events, batch_size=5)
    with Ledger(location) as again:
        assert again.count() == 0
        assert again.import_events(events) == len(events)


def test_jsonl_to_postgres_and_back_keeps_every_byte(postgres_url: str, tmp_path: Path) -> None:
    source = _source(tmp_path)
    out, back = tmp_path / "out.jsonl", tmp_path / "back.jsonl"
    location = f"{postgres_url}&table=review_bytes"
    assert main(["export", "--ledger", str(source), "--out", str(out)]) == 0
    assert main(["import", "--ledger", location, "--from", str(out)]) == 0
    assert "".join(j + "\n" for j in _json(postgres_url, "review_bytes")).encode() == (
        source.read_bytes()
    )
    assert main(["export", "--ledger", location, "--out", str(back)]) == 0
    assert back.read_bytes() == source.read_bytes()
    assert main(["verify", "--ledger", location, "--jobs", "2"]) == 0

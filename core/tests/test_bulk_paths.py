"""The fast paths of bulk ingest and reads agree with the general ones: ids drawn in bulk are
version-4 UUIDs, the quick value check accepts only what the full walk accepts, a batch shares
one transaction time, facts are presented as ``with_`` would, and a JSONL file past the open
limit is refused with its way out, unchanged."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.backends.jsonl_size import MAX_MB_ENV
from agent_custody_state.ledger.arguments import _plain_json, new_ids, value_arg
from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state.ledger.model import Fact, Source


def test_bulk_ids_are_distinct_version_4_uuids() -> None:
    ids = list(new_ids(2000))
    assert len(set(ids)) == 2000
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text
        assert (parsed.version, parsed.variant) == (4, uuid.RFC_4122)


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        "s",
        2**53 - 1,
        -(2**53 - 1),
        2**53,
        0.5,
        float("nan"),
        float("inf"),
        {"a": [1, {"b": None}]},
        {1: "int key"},
        (1, 2),
        {"k": {1, 2}},
        _nested(255),
        _nested(256),
        _nested(257),
        type("Text", (str,), {})("a str subclass"),
    ],
)
def test_quick_value_check_never_accepts_what_the_full_walk_refuses(value: Any) -> None:
    full_ok = _full_walk_accepts(value)
    if _plain_json(value):
        assert full_ok
    try:
        value_arg(value)
        assert full_ok  # value_arg (quick check first) accepts exactly what the walk accepts
    except LedgerError:
        assert not full_ok


def _full_walk_accepts(value: Any) -> bool:
    """``value_arg`` with the quick check out of the way: its full walk decides."""
    import agent_custody_state.ledger.arguments as arguments

    saved = arguments._plain_json
    arguments._plain_json = lambda _value, _depth=0: False  # type: ignore[assignment]
    try:
        arguments.value_arg(value)
        return True
    except LedgerError:
        return False
    finally:
        arguments._plain_json = saved


def test_assert_many_reads_the_clock_once_and_shares_the_time(tmp_path: Path) -> None:
    reads: list[datetime] = []
    start = datetime(2026, 1, 1, tzinfo=UTC)

    def clock() -> datetime:
        reads.append(start + timedelta(seconds=len(reads)))
        return reads[-1]

    with Ledger(tmp_path / "l.jsonl", clock=clock) as ledger:
        events = ledger.assert_many(
            [
                {"subject": f"s{i}", "predicate": "p", "value": i, "space": "o", "actor": "a"}
                for i in range(100)
            ]
        )
    assert len(reads) == 1
    assert {e.tx_time for e in events} == {"2026-01-01T00:00:00.000Z"}
    assert {e.fact.valid_from for e in events} == {"2026-01-01T00:00:00.000Z"}


def test_presented_is_with_() -> None:
    fact = Fact("f", "s", "p", {"v": 1}, "o", "a", Source("r"), extra={"k": 1})
    for valid_to, provenance in [(None, "claimed"), ("2026-01-01T00:00:00.000Z", "attested")]:
        assert fact.presented(valid_to, provenance) == fact.with_(
            valid_to=valid_to, provenance=provenance
        )


def test_a_jsonl_file_past_the_open_limit_is_refused_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "big.jsonl"
    with Ledger(path) as ledger:
        ledger.assert_many(
            [
                {
                    "subject": f"s{i}",
                    "predicate": "p",
                    "value": "x" * 1000,
                    "space": "o",
                    "actor": "a",
                }
                for i in range(1200)
            ]
        )
    data = path.read_bytes()
    assert len(data) > 2**20
    with pytest.raises(EventBackendError) as info:
        Ledger(path, max_mb=1)
    message = str(info.value)
    size = f"{len(data) / 2**20:.1f}"
    assert message.startswith(f"{path} is {size} MB, beyond the JSONL backend's limit of 1.0 MB")
    assert f"{MAX_MB_ENV}=0 agent-custody-memory export --ledger {path}" in message
    monkeypatch.setenv(MAX_MB_ENV, "1")
    with pytest.raises(EventBackendError, match="beyond the JSONL backend's limit of 1.0 MB"):
        Ledger(path)
    assert path.read_bytes() == data
    monkeypatch.setenv(MAX_MB_ENV, "0")  # no limit
    with Ledger(path) as ledger:
        assert ledger.count() == 1200
    monkeypatch.setenv(MAX_MB_ENV, "lots")
    with pytest.raises(EventBackendError, match=f"^{MAX_MB_ENV}='lots' is not a number of MB$"):
        Ledger(path)


def test_the_append_that_crosses_the_jsonl_limit_warns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "grows.jsonl"
    item = {"predicate": "p", "value": "x" * 1000, "space": "o", "actor": "a"}
    with Ledger(path, max_mb=1) as ledger:
        ledger.assert_many([{**item, "subject": f"s{i}"} for i in range(500)])
        assert not [r for r in caplog.records if "limit" in r.getMessage()]
        ledger.assert_many([{**item, "subject": f"t{i}"} for i in range(700)])
        ledger.assert_many([{**item, "subject": f"u{i}"} for i in range(10)])
    warned = [r.getMessage() for r in caplog.records if "grown past" in r.getMessage()]
    assert len(warned) == 1  # once, at the crossing, not at every later append
    assert warned[0].startswith(f"{path} has grown past the JSONL backend's limit of 1.0 MB")

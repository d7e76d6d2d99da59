"""JSONL specifics: TypeScript-written files, torn tails, several processes (failing writes and
crashed batches are in ``test_jsonl_failures.py``)."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import EventBackendError, Ledger
from agent_custody_state.backends.jsonl import JsonlBackend

# Written by hand in the SPEC 1.2 format, the way @agent-custody/state 0.5 writes its file.
TS_LINES = [
    '{"eventId":"0b9e2a7c-1c1e-4c43-9d0a-6f0b9e2a7c11","kind":"assert","txTime":"2026-09-01T10:00:00.000Z","fact":{"factId":"70cea8ca-0000-4000-8000-000000000001","subject":"acct:42","predicate":"plan","value":"pro","space":"org","actor":"support-agent","source":{"receiptId":"2814"},"provenance":"attested","validFrom":"2026-09-01T10:00:00.000Z","validTo":null,"confidence":null,"external":{"mem0":"mem_7"}},"supersedes":null}',
    '{"eventId":"0b9e2a7c-1c1e-4c43-9d0a-6f0b9e2a7c12","kind":"assert","txTime":"2026-09-05T10:00:00.000Z","fact":{"factId":"70cea8ca-0000-4000-8000-000000000002","subject":"acct:42","predicate":"plan","value":"enterprise","space":"org","actor":"support-agent","source":{"receiptId":"2815"},"provenance":"attested","validFrom":"2026-09-04T00:00:00.000Z","validTo":null,"confidence":0.9},"supersedes":"70cea8ca-0000-4000-8000-000000000001"}',
    "",
    '{"eventId":"0b9e2a7c-1c1e-4c43-9d0a-6f0b9e2a7c13","kind":"retract","txTime":"2026-09-06T10:00:00.000Z","factId":"70cea8ca-0000-4000-8000-000000000002","actor":"ops","reason":"wrong account","source":{"receiptId":"2816"},"newerField":[1,2]}',
]


@pytest.fixture
def ts_file(tmp_path: Path) -> Path:
    path = tmp_path / "ts" / "ledger.jsonl"
    path.parent.mkdir()
    path.write_text("\n".join(TS_LINES) + "\n")
    return path


def test_typescript_file_opens_and_answers(ts_file: Path) -> None:
    with Ledger(ts_file) as ledger:
        assert ledger.count() == 3
        # As known on 09-05: enterprise from 09-04, pro before.
        assert [f.value for f in ledger.as_of(tx_at="2026-09-05T12:00:00Z")] == ["enterprise"]
        before = ledger.as_of(tx_at="2026-09-05T12:00:00Z", valid_at="2026-09-03T00:00:00Z")
        assert [f.value for f in before] == ["pro"]
        assert before[0].valid_to == "2026-09-04T00:00:00.000Z"
        # The retraction on 09-06 makes pro current again.
        assert [f.value for f in ledger.as_of()] == ["pro"]
        first = ledger.get("70cea8ca-0000-4000-8000-000000000001")
        assert first is not None and first.external == {"mem0": "mem_7"}


def test_round_trip_is_byte_identical(ts_file: Path, tmp_path: Path) -> None:
    """Our lines are the TypeScript lines: re-serialising every event changes no byte."""
    with Ledger(ts_file) as ledger:
        lines = [e.to_json() for e in ledger.export()]
    original = [line for line in TS_LINES if line]
    # The TS writer puts "external" after provenance (SPEC 1.1 order); line 1 above was written
    # with it at the end, as older versions did, so compare parsed dicts for it.
    assert lines[1:] == original[1:]
    assert json.loads(lines[0]) == json.loads(original[0])


def test_index_keys_in_a_value_are_written_as_javascript_writes_them(tmp_path: Path) -> None:
    """JSON.stringify lists array-index keys ("9", "10") first at every depth, the rest in
    insertion order: our line for the event is the TypeScript line, after appends, after a
    forget rewrote the file and after a reopen."""
    path = tmp_path / "l.jsonl"
    value = {
        "b": 1,
        "a": 4,
        "10": 2,
        "9": 3,
        "4294967295": 5,
        "01": 6,
        "n": {"z": 0, "2": [{"x": None, "11": True, "1": "one"}]},
    }
    fact_id = "70cea8ca-0000-4000-8000-0000000000aa"
    expected_tail = (
        '"kind":"assert","txTime":"2026-09-01T10:00:00.000Z","fact":{"factId":"' + fact_id + '",'
        '"subject":"acct:42","predicate":"seats","value":{"9":3,"10":2,"b":1,"a":4,'
        '"4294967295":5,"01":6,"n":{"2":[{"1":"one","11":true,"x":null}],"z":0}},"space":"org",'
        '"actor":"a","source":{"receiptId":null},"provenance":"claimed",'
        '"validFrom":"2026-09-01T10:00:00.000Z","validTo":null,"confidence":null},'
        '"supersedes":null}'
    )
    clock = lambda: datetime(2026, 9, 1, 10, tzinfo=UTC)  # noqa: E731
    # Without the chain, whose keys (salt, commitment, record) the line would add after these;
    # test_chain checks that the chained line is this one with keys only added.
    with Ledger(path, clock=clock, chain=False) as ledger:
        event = ledger.assert_fact(
            subject="acct:42",
            predicate="seats",
            value=value,
            space="org",
            actor="a",
            fact_id=fact_id,
        )
        expected = '{"eventId":"' + event.event_id + '",' + expected_tail
        assert path.read_text().splitlines() == [expected]
        other = ledger.assert_fact(
            subject="s", predicate="p", value={"3": 3}, space="org", actor="a"
        )
        ledger.forget(fact_id=other.fact_id, actor="dpo", reason="gdpr")  # rewrites the file
        assert path.read_text().splitlines()[0] == expected
    with Ledger(path) as ledger:
        assert next(iter(ledger.export())).to_json() == expected


def test_forget_rewrites_only_the_assert(ts_file: Path) -> None:
    before = ts_file.read_text().splitlines()
    with Ledger(ts_file) as ledger:
        ledger.forget(fact_id="70cea8ca-0000-4000-8000-000000000002", actor="dpo", reason="gdpr")
    after = ts_file.read_text().splitlines()
    assert after[0] == before[0] and after[3] == before[3] and after[2] == ""
    assert '"enterprise"' not in ts_file.read_text()
    assert json.loads(after[-1])["kind"] == "forget"
    assert len(after) == len(before) + 1


def test_missing_final_newline_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    path.write_text(TS_LINES[0])
    with Ledger(path) as ledger:
        assert ledger.count() == 1
        ledger.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")
    lines = path.read_text().splitlines()
    assert len(lines) == 2 and lines[0] == TS_LINES[0]


def test_torn_tail_is_cut_off_and_recorded(ts_file: Path) -> None:
    """The torn bytes are cut off; their record keeps where they were, their length and their
    sha256, never the bytes themselves (they may hold a value a later forget must erase)."""
    size = ts_file.stat().st_size
    with open(ts_file, "a") as fh:
        fh.write(TS_LINES[0][:57])
    with Ledger(ts_file) as ledger:
        assert ledger.count() == 3
        store = ledger.backend
        assert isinstance(store, JsonlBackend) and "torn final line" in store.repairs[0]
    aside = list(ts_file.parent.glob("ledger.jsonl.torn-*"))
    assert len(aside) == 1
    record = json.loads(aside[0].read_text())
    assert (record["offset"], record["length"]) == (size, 57)
    assert record["sha256"] == hashlib.sha256(TS_LINES[0][:57].encode()).hexdigest()
    assert TS_LINES[0][:57] not in aside[0].read_text()
    assert ts_file.read_text().endswith("\n")


def test_torn_tail_can_be_refused(ts_file: Path) -> None:
    with open(ts_file, "a") as fh:
        fh.write('{"eventId":"x","ki')
    with pytest.raises(EventBackendError, match="torn final line"):
        JsonlBackend(ts_file, on_torn="raise")


def test_corrupt_middle_line_is_an_error(ts_file: Path) -> None:
    text = ts_file.read_text().splitlines()
    text[1] = text[1][:40]
    ts_file.write_text("\n".join(text) + "\n")
    with pytest.raises(EventBackendError, match="is not a valid event"):
        JsonlBackend(ts_file)


@pytest.mark.parametrize("fact", ['[["factId", "f"]]', '"f"', "null"])
def test_a_line_whose_fact_is_not_an_object_is_named(ts_file: Path, fact: str) -> None:
    # A fact that is a list of pairs must not pass for an object (the decoder copies dicts).
    lines = ts_file.read_text().splitlines()
    i = next(n for n, line in enumerate(lines) if '"kind":"assert"' in line)
    data = json.loads(lines[i])
    data["fact"] = "@@"
    lines[i] = json.dumps(data, separators=(",", ":")).replace('"@@"', fact)
    ts_file.write_text("\n".join(lines) + "\n")
    with pytest.raises(EventBackendError, match=f"event {i + 1}.*fact must be a JSON object"):
        JsonlBackend(ts_file)


def _writer(path: str, worker: int, count: int) -> None:
    with Ledger(path) as ledger:
        for i in range(count):
            ledger.assert_fact(
                subject=f"w{worker}", predicate="n", value=i, space="org", actor=f"w{worker}"
            )


def test_two_processes_lose_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.jsonl")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, w, 150)) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with Ledger(path) as ledger:
        assert ledger.count() == 300
        for w in range(2):
            assert sorted(f.value for f in ledger.as_of(subject=f"w{w}")) == list(range(150))
    lines = Path(path).read_text().splitlines()
    assert all(json.loads(line)["kind"] == "assert" for line in lines)


def _superseder(path: str, target: str, barrier: Any, results: Any) -> None:
    from agent_custody_state import LedgerError

    with Ledger(path) as ledger:
        barrier.wait()
        try:
            ledger.assert_fact(
                subject="s",
                predicate="p",
                value=os.getpid(),
                space="org",
                actor="a",
                supersedes=target,
            )
            results.put("ok")
        except LedgerError as exc:
            results.put(str(exc))


def test_concurrent_supersession_one_wins(tmp_path: Path) -> None:
    path = str(tmp_path / "race.jsonl")
    with Ledger(path) as ledger:
        target = ledger.assert_fact(
            subject="s", predicate="p", value=0, space="org", actor="a"
        ).fact_id
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(3), ctx.Queue()
    procs = [
        ctx.Process(target=_superseder, args=(path, target, barrier, results)) for _ in range(3)
    ]
    for p in procs:
        p.start()
    outcomes = sorted(results.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(30)
    assert outcomes == sorted(
        ["ok", f"fact {target} is already superseded", f"fact {target} is already superseded"]
    )


def test_a_rewritten_file_with_the_old_inode_number_is_read_again(tmp_path: Path) -> None:
    """Two forgets elsewhere rename two new files over the ledger; on many file systems the
    second gets the inode number the first freed, the one this reader indexed. The reader must
    still see a different file (it holds its file open, so the number cannot come back) and
    read it from the start, not on from its stale offset into moved lines."""
    path = tmp_path / "l.jsonl"
    with Ledger(str(path)) as reader, Ledger(str(path)) as other:
        ids = [
            reader.assert_fact(
                subject=f"s{i}", predicate="p", value="v" * 40, space="org", actor="a"
            ).fact_id
            for i in range(6)
        ]
        before = os.stat(path).st_ino
        other.forget(fact_id=ids[0], actor="a", reason="erasure")
        other.forget(fact_id=ids[1], actor="a", reason="erasure")
        other.assert_fact(subject="late", predicate="p", value="w", space="org", actor="a")
        assert reader.count() == other.count() == 9, (
            f"inode number reused: {os.stat(path).st_ino == before}"
        )
        assert [f.fact_id for f in reader.as_of(subject="late")] == [
            f.fact_id for f in other.as_of(subject="late")
        ]
        assert reader.get(ids[0]).value is None  # the rewritten line, read again

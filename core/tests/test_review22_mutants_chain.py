"""The hash chain's documented behaviour no test pinned down (twenty-second review, mutation
testing of ``ledger/chain.py``).

* ``head_after``: when the last event carries no chain record, the head is that of the last
  record before it with every later event's leaf linked on, those events read back from the end;
  past ``TAIL_LIMIT`` such events the head comes from the forward pass (which keeps none in
  memory), where a record at its position gives the head after it. Mutants that passed over the
  records they met, read back past ``TAIL_LIMIT`` or fell through to the forward pass after
  reading everything back gave the same head, so every test passed, while an append after the
  original wrote read the whole ledger (or held it in memory). Pinned: what is read, that the
  head is the same either way, and that the next append verifies.
* ``public_fact`` and ``public_event``: no tool result carries a salt, a commitment or a chain
  record (the original's shape), and a fact with none of them is shown as it is.
* ``ChainWriter.sealed``: a ledger without a checkpoint key or without the chain logs no
  checkpoint failure on each append, and a checkpoint that fails is logged while the append
  stands.
* ``seal``: an event carrying external ids, unknown keys or a number the C encoder writes
  otherwise than JavaScript takes the checked encoding, so its leaf is the canonical one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state import Ledger
from agent_custody_state.ledger import chain
from agent_custody_state.ledger.chain import ChainHead, head_after, seal
from agent_custody_state.ledger.model import Event, event_from_dict
from agent_custody_state.ledger.verify import verify_lines
from agent_custody_state.server.service import MemoryService

FACT: dict[str, Any] = {"subject": "acct:42", "predicate": "plan", "space": "org", "actor": "a"}

#: An assert as the TypeScript original writes it (no chain record, no salt, no commitment).
ORIGINAL = (
    '{"eventId":"EID","kind":"assert","txTime":"2026-09-01T10:00:00.000Z","fact":{"factId":'
    '"FID","subject":"acct:7","predicate":"plan","value":"pro","space":"org","actor":"a",'
    '"source":{"receiptId":"r1"},"provenance":"attested","validFrom":"2026-09-01T10:00:00.000Z",'
    '"validTo":null,"confidence":null},"supersedes":null}'
)


def _write_originals(path: Path, count: int) -> None:
    with open(path, "a") as fh:
        for n in range(1, count + 1):
            fh.write(ORIGINAL.replace("EID", f"o{n}").replace("FID", f"of{n}") + "\n")


def _ours_then_originals(path: Path) -> str:
    """Three chained events of ours, then two of the original's; the id of our last one."""
    with Ledger(path) as ledger:
        for value in ("a", "b", "c"):
            ledger.assert_fact(**FACT, value=value)
        ours = ledger.backend.last_event()
        assert ours is not None and ledger.chain_head().chained
    _write_originals(path, 2)
    return ours.event_id


class Reads:
    """What ``chain_head`` reads: events back from the end, passes from the start, leaves."""

    def __init__(self, ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
        self.back: list[str] = []
        self.passes = 0
        self.leaves = 0
        backend = ledger.backend
        newest_first, stored, leaf_of = (
            backend.events_newest_first,
            backend.stored_events,
            chain.leaf_of,
        )

        def counted_back() -> Iterator[Event]:
            for event in newest_first():  # type: ignore[union-attr]
                self.back.append(event.event_id)
                yield event

        def counted_pass() -> Iterator[str | bytes]:
            self.passes += 1
            yield from stored()

        def counted_leaf(data: dict[str, Any]) -> bytes:
            self.leaves += 1
            return leaf_of(data)

        monkeypatch.setattr(backend, "events_newest_first", counted_back)
        monkeypatch.setattr(backend, "stored_events", counted_pass)
        monkeypatch.setattr(chain, "leaf_of", counted_leaf)


def _full_pass(ledger: Ledger) -> ChainHead:
    return head_after(ledger.backend.last_event(), ledger.backend.stored_events)


def _append_verifies(path: Path) -> None:
    with Ledger(path) as ledger:
        ledger.assert_fact(**FACT, value="d")
    report = verify_lines(path.read_text().splitlines())
    assert report.ok, report.problems


def test_the_head_after_the_originals_events_reads_back_only_to_the_last_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "l.jsonl"
    ours = _ours_then_originals(path)
    with Ledger(path) as ledger:
        reads = Reads(ledger, monkeypatch)
        head = ledger.chain_head()
        assert (reads.back, reads.passes, reads.leaves) == (["o2", "o1", ours], 0, 2)
        monkeypatch.undo()
        assert head == _full_pass(ledger) and head.seq == 5 and not head.chained
    _append_verifies(path)


def test_reading_back_keeps_at_most_tail_limit_events_then_passes_forward(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two events without a record: a limit of two reads them back (and the record before
    them); a limit of one stops at the second and passes forward from the start, taking the
    head from each record at its position (a leaf is computed for the original's events only)."""
    path = tmp_path / "l.jsonl"
    ours = _ours_then_originals(path)
    heads = []
    for limit, expected in ((2, (["o2", "o1", ours], 0, 2)), (1, (["o2", "o1"], 1, 2))):
        with Ledger(path) as ledger:
            monkeypatch.setattr(chain, "TAIL_LIMIT", limit)
            reads = Reads(ledger, monkeypatch)
            heads.append(ledger.chain_head())
            assert (reads.back, reads.passes, reads.leaves) == expected, limit
            monkeypatch.undo()
            assert heads[-1] == _full_pass(ledger)
    assert heads[0] == heads[1] and heads[0].seq == 5
    _append_verifies(path)


def test_a_ledger_with_no_record_is_read_back_once_to_its_genesis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the original's events: read back to the first, their leaves linked from the zero
    head, with no second pass from the start."""
    path = tmp_path / "l.jsonl"
    _write_originals(path, 3)
    with Ledger(path) as ledger:
        reads = Reads(ledger, monkeypatch)
        head = ledger.chain_head()
        assert (reads.back, reads.passes, reads.leaves) == (["o3", "o2", "o1"], 0, 3)
        monkeypatch.undo()
        assert head == _full_pass(ledger) and head.seq == 3 and not head.chained
    _append_verifies(path)


def test_no_tool_result_hands_out_a_salt_or_a_commitment(tmp_path: Path) -> None:
    """``public_fact`` and ``public_event``: tool results have the original's shape (no chain
    record, no chain fields in a fact), and a salt is never handed out. A forgotten fact's
    assert keeps its commitment without its salt: that one is left out too."""
    _write_originals(tmp_path / "l.jsonl", 1)  # a fact without chain fields, shown as it is
    service = MemoryService.build(Ledger(tmp_path / "l.jsonl"), require_gateway=False)

    def call(name: str, **arguments: Any) -> str:
        result = anyio.run(service.call, name, arguments, None, "direct")
        assert not result.is_error, result.texts
        return "\n".join(result.texts)

    written = json.loads(call("memory.write", **FACT, value="pro"))
    fact_id = written["fact"]["factId"]
    shown = [
        json.dumps(written),
        call("memory.read", subject="acct:42", includeClaimed=True),
        call("memory.get", factId=fact_id),
        call("memory.history", factId=fact_id),
    ]
    call("memory.forget", factId=fact_id, reason="erase")
    shown += [call("memory.get", factId=fact_id), call("memory.history", factId=fact_id)]
    original = json.loads(call("memory.read", subject="acct:7"))["facts"]
    assert [f["factId"] for f in original] == ["of1"] and original[0]["value"] == "pro"
    assert json.loads(call("memory.get", factId="of1"))["factId"] == "of1"
    assert '"pro"' in shown[1] and fact_id in shown[-1]
    for text in shown:
        assert "valueSalt" not in text and "valueCommitment" not in text, text
        assert '"chain"' not in text and '"leaf"' not in text, text
    stored = (tmp_path / "l.jsonl").read_text()
    assert "valueCommitment" in stored and '"chain"' in stored


RETRACT = {
    "eventId": "r1",
    "kind": "retract",
    "txTime": "2026-09-02T10:00:00.000Z",
    "factId": "of1",
    "actor": "ops",
    "reason": "wrong",
    "source": {"receiptId": None},
}


def _assert_with(**fact: Any) -> dict[str, Any]:
    data = json.loads(ORIGINAL.replace("EID", "e1").replace("FID", "f1"))
    data["fact"].update(fact)
    return dict(data)


@pytest.mark.parametrize(
    "data",
    [
        _assert_with(external={"10": "x", "9": "y"}),  # JavaScript lists "9" first
        _assert_with(valueSalt="AAAA", valueCommitment="00" * 32, n=1.0),  # 1 in JavaScript
        {**RETRACT, "n": 1.0},
        {**RETRACT, "chain": {"seq": 7, "leaf": "00" * 32, "head": "00" * 32}, "n": 1.0},
    ],
)
def test_an_event_with_keys_the_fast_encoder_writes_differently_gets_its_canonical_leaf(
    data: dict[str, Any],
) -> None:
    """docs/proofs.md: ``leaf = SHA-256(0x00 || canonical(redacted))``. An event carrying
    external ids, unknown keys or a number JavaScript writes otherwise than the C encoder takes
    the checked encoding when sealed, so its recorded leaf is the one ``verify`` computes."""
    [sealed] = seal(ChainHead(0, chain.ZERO_HEAD, chained=False), [event_from_dict(data)])
    record = sealed.extra["chain"]
    assert record["seq"] == 1 and record["leaf"] == chain.leaf_of(sealed.to_dict()).hex()
    assert verify_lines([sealed.to_json()]).ok


@pytest.mark.parametrize(("chained", "signed"), [(True, False), (False, True), (True, True)])
def test_an_append_reports_no_checkpoint_failure_when_there_is_nothing_to_sign(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, chained: bool, signed: bool
) -> None:
    """``ChainWriter.sealed`` tells the checkpointer of progress only when there is one and the
    events carry chain records: a ledger without a checkpoint key, or without the chain, logs
    no "could not write the checkpoint" on every append (the error a missing check caught)."""
    key = Ed25519PrivateKey.generate() if signed else None
    with (
        caplog.at_level(logging.ERROR, logger="agent_custody_state.ledger.chain"),
        Ledger(tmp_path / "l.jsonl", chain=chained, checkpoint_key=key) as ledger,
    ):
        ledger.assert_fact(**FACT, value="a")
        ledger.assert_many([{**FACT, "subject": "acct:43", "value": "b"}])
    assert [r.getMessage() for r in caplog.records] == []


def test_a_checkpoint_that_fails_is_logged_and_the_append_stands(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint must never undo a durable write: its failure is logged, with the chain's
    size, and the events stay appended."""
    path = tmp_path / "l.jsonl"
    with Ledger(path, checkpoint_key=Ed25519PrivateKey.generate()) as ledger:
        checkpointer = ledger._chain.checkpointer

        def fails(before: int, head: ChainHead) -> None:
            raise OSError("disk full")

        monkeypatch.setattr(checkpointer, "progressed", fails)
        with caplog.at_level(logging.ERROR, logger="agent_custody_state.ledger.chain"):
            ledger.assert_fact(**FACT, value="a")
        assert ledger.count() == 1
    [record] = caplog.records
    assert record.getMessage() == "could not write the checkpoint at 1 events"
    assert record.exc_info is not None and "disk full" in str(record.exc_info[1])
    assert verify_lines(path.read_text().splitlines()).ok

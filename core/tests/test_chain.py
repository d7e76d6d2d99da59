"""The chain module and the ledger's chained writes: leaves, links, genesis, forget, wire form."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_custody_state import Ledger
from agent_custody_state.canonical import _encode, canonical_json
from agent_custody_state.ledger.chain import (
    ZERO_HEAD,
    ChainHead,
    canonical_utf8,
    head_after,
    leaf_of,
    link,
    redacted,
    seal,
    value_commitment,
)
from agent_custody_state.ledger.model import AssertEvent, Event, event_from_dict, event_from_json
from agent_custody_state.ledger.verify import verify_lines

FACT = {"subject": "acct:42", "predicate": "plan", "space": "org", "actor": "agent"}
SPEC_FACT_KEYS = [
    "factId",
    "subject",
    "predicate",
    "value",
    "space",
    "actor",
    "source",
    "provenance",
    "validFrom",
    "validTo",
    "confidence",
]

# Written the way @agent-custody/state 0.5 writes its file: no chain keys anywhere.
ORIGINAL_LINES = [
    '{"eventId":"e1","kind":"assert","txTime":"2026-09-01T10:00:00.000Z","fact":{"factId":"f1",'
    '"subject":"acct:42","predicate":"plan","value":"pro","space":"org","actor":"a","source":'
    '{"receiptId":"r1"},"provenance":"attested","validFrom":"2026-09-01T10:00:00.000Z",'
    '"validTo":null,"confidence":null},"supersedes":null}',
    '{"eventId":"e2","kind":"retract","txTime":"2026-09-02T10:00:00.000Z","factId":"f1",'
    '"actor":"ops","reason":"wrong","source":{"receiptId":null}}',
]


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def _verify(path: Path, **kw: Any) -> Any:
    return verify_lines(path.read_bytes().splitlines(), **kw)


# -- the chain module ---------------------------------------------------------------------------


def test_redacted_form_leaves_out_what_a_forget_changes() -> None:
    data = {
        "eventId": "e",
        "kind": "assert",
        "fact": {"factId": "f", "value": 1, "valueSalt": "s", "valueCommitment": "c", "x": 2},
        "chain": {"seq": 1},
    }
    assert redacted(data) == {
        "eventId": "e",
        "kind": "assert",
        "fact": {"factId": "f", "valueCommitment": "c", "x": 2},
    }
    assert data["fact"]["value"] == 1 and "chain" in data  # not changed in place
    forgotten = {
        "eventId": "e",
        "kind": "assert",
        "fact": {"factId": "f", "value": None, "valueCommitment": "c", "x": 2},
        "chain": {"seq": 1, "other": True},
    }
    forgotten["fact"]["forgotten"] = {"valueDigest": None, "digestKind": "none", "at": "t"}
    assert leaf_of(forgotten) == leaf_of(data)
    # Anything else is in the leaf: the commitment, unknown keys, other events' keys.
    assert leaf_of({**data, "fact": {**data["fact"], "valueCommitment": "d"}}) != leaf_of(data)
    assert leaf_of({**data, "future": 1}) != leaf_of(data)
    action = {"eventId": "e", "kind": "retract", "value": 1}
    assert leaf_of(action) != leaf_of({**action, "value": 2})


def test_commitment_is_keyed_by_the_salt() -> None:
    salt = bytes(range(32))
    assert value_commitment(salt, {"b": 1, "a": [1.5]}) == value_commitment(
        salt, {"a": [1.5], "b": 1}
    )
    assert value_commitment(salt, "pro") != value_commitment(bytes(32), "pro")
    assert len(value_commitment(salt, None)) == 64


def test_seal_links_each_event_to_the_head_before_it() -> None:
    def assert_event(n: int) -> AssertEvent:
        return event_from_dict(
            {
                "eventId": f"e{n}",
                "kind": "assert",
                "txTime": "2026-09-01T10:00:00.000Z",
                "fact": {"factId": f"f{n}", **FACT, "value": n},
                "supersedes": None,
            }
        )  # type: ignore[return-value]

    events = seal(ChainHead(0, ZERO_HEAD, chained=False), [assert_event(1), assert_event(2)])
    first, second = (e.extra["chain"] for e in events)
    assert first["genesis"] == {"size": 0, "head": ZERO_HEAD} and "genesis" not in second
    assert [first["seq"], second["seq"]] == [1, 2]
    for event, record in zip(events, (first, second), strict=True):
        assert record["leaf"] == leaf_of(event.to_dict()).hex()
    assert first["head"] == link(bytes(32), bytes.fromhex(first["leaf"])).hex()
    assert second["head"] == link(bytes.fromhex(first["head"]), bytes.fromhex(second["leaf"])).hex()
    assert head_after(events[-1], lambda: [e.to_json() for e in events]) == ChainHead(
        2, second["head"]
    )
    # Unchained events are folded from the last record before them.
    plain = assert_event(3)
    folded = head_after(plain, lambda: [e.to_json() for e in [*events, plain]])
    assert folded == ChainHead(
        3, link(bytes.fromhex(second["head"]), leaf_of(plain.to_dict())).hex(), chained=False
    )


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_canonical_fast_path_is_the_exact_encoder(value: Any) -> None:
    parts: list[str] = []
    _encode(value, parts, True)
    exact = "".join(parts)
    assert canonical_json(value) == exact
    try:
        expected = exact.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: JSON.stringify escapes it, so this cannot
        return  # happen (the exact encoder escapes too); hypothesis text may hold one raw
    assert canonical_utf8(value) == expected


@pytest.mark.parametrize(
    "value",
    [1.0, -0.0, 1e-05, 1e16, 1e21, 2**53 + 1, {"10": 1, "9": 2}, {"\U0001f600": 1, "\uffff": 2}],
)
def test_canonical_utf8_takes_the_exact_encoder_where_json_dumps_differs(value: Any) -> None:
    assert canonical_utf8(value) == canonical_json(value).encode("utf-8")
    assert canonical_utf8([value, "x"]) == canonical_json([value, "x"]).encode("utf-8")


# -- chained writes -----------------------------------------------------------------------------


def test_a_chained_line_is_the_original_line_with_keys_only_added(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.jsonl") as ledger:
        event = ledger.assert_fact(**FACT, value={"tier": "pro"}, confidence=0.5)
        ledger.retract(fact_id=event.fact_id, actor="a", reason="r")
    assert_line, retract_line = _lines(tmp_path / "l.jsonl")
    data = json.loads(assert_line)
    assert list(data) == ["eventId", "kind", "txTime", "fact", "supersedes", "chain"]
    assert list(data["fact"]) == [*SPEC_FACT_KEYS, "valueSalt", "valueCommitment"]
    assert list(data["chain"]) == ["seq", "genesis", "leaf", "head"]
    salt = base64.b64decode(data["fact"]["valueSalt"])
    assert len(salt) == 32
    assert data["fact"]["valueCommitment"] == value_commitment(salt, {"tier": "pro"})
    # The original's reader keeps the new keys as unknown keys and writes the line back as is.
    assert event_from_json(assert_line).to_json() == assert_line
    action = json.loads(retract_line)
    assert list(action) == [
        *["eventId", "kind", "txTime", "factId", "actor", "reason", "source"],
        "chain",
    ]
    assert action["chain"]["seq"] == 2 and "genesis" not in action["chain"]


def test_forget_keeps_every_leaf_and_erases_the_salt(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        facts = [ledger.assert_fact(**FACT, value=f"secret-{i}") for i in range(4)]
        before = [json.loads(line)["chain"] for line in _lines(path)]
        ledger.forget(fact_id=facts[1].fact_id, actor="a", reason="erase")
        ledger.sweep(before="2999-01-01T00:00:00Z", actor="a", reason="sweep", keep_digest=False)
        head = ledger.chain_head()
    lines = _lines(path)
    assert [json.loads(line)["chain"] for line in lines[:4]] == before
    assert "secret" not in path.read_text()
    assert "valueSalt" not in path.read_text()
    forgotten = json.loads(lines[1])["fact"]
    assert forgotten["value"] is None and forgotten["valueCommitment"]
    report = _verify(path)
    assert report.ok, report.problems
    assert (report.events, report.genesis, report.head) == (8, 1, head.hash)
    assert head.seq == 8


def test_a_ledger_of_the_original_chains_from_a_genesis(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    path.write_text("\n".join(ORIGINAL_LINES) + "\n")
    report = _verify(path)
    assert report.ok and report.genesis is None and report.notes
    with Ledger(path) as ledger:
        assert ledger.count() == 2
        expected = ledger.chain_head()
        assert expected.seq == 2 and not expected.chained
        ledger.assert_fact(**FACT, value="x")
        ledger.forget(fact_id="f1", actor="a", reason="r")  # a fact of the original
    lines = _lines(path)
    assert len(lines) == 4 and "chain" not in lines[0] + lines[1]
    assert json.loads(lines[2])["chain"]["genesis"] == {"size": 2, "head": expected.hash}
    report = _verify(path)
    assert report.ok, report.problems
    assert report.genesis == 3
    # An edit of an event before the genesis breaks the genesis record.
    path.write_text(path.read_text().replace('"wrong"', '"right"'))
    report = _verify(path)
    assert not report.ok and report.first is not None and report.first.seq == 3
    assert "before the genesis" in report.first.reason


def test_import_keeps_the_original_events_unchanged(tmp_path: Path) -> None:
    events = [event_from_json(line) for line in ORIGINAL_LINES]
    with Ledger(tmp_path / "l.jsonl") as ledger:
        assert ledger.import_events(events) == 2
    assert _lines(tmp_path / "l.jsonl") == ORIGINAL_LINES


def test_without_the_chain_events_are_written_as_before(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.jsonl", chain=False) as ledger:
        ledger.assert_fact(**FACT, value="x")
    line = _lines(tmp_path / "l.jsonl")[0]
    assert "chain" not in line and "valueSalt" not in line


def test_batches_and_several_instances_keep_one_chain(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    with Ledger(path) as one, Ledger(path) as two:
        one.assert_many([{**FACT, "subject": f"s{i}", "value": i} for i in range(5)])
        two.assert_fact(**FACT, value="two")
        one.assert_fact(**FACT, value="one")
        assert one.chain_head() == two.chain_head()
        assert one.chain_head().seq == 7
    report = _verify(path)
    assert report.ok, report.problems


def test_extra_keys_cannot_replace_the_chain_record(tmp_path: Path) -> None:
    from agent_custody_state import LedgerError

    with Ledger(tmp_path / "l.jsonl") as ledger:
        fact = ledger.assert_fact(**FACT, value="x")
        with pytest.raises(LedgerError, match="chain"):
            ledger.retract(fact_id=fact.fact_id, actor="a", reason="r", extra={"chain": {}})


def test_an_export_imported_keeps_its_chain_and_goes_on(tmp_path: Path) -> None:
    with Ledger(tmp_path / "a.jsonl") as source:
        fact = source.assert_fact(**FACT, value="x")
        source.forget(fact_id=fact.fact_id, actor="a", reason="r")
        exported = list(source.export())
    with Ledger(tmp_path / "b.jsonl") as copy:
        copy.import_events(exported)
        copy.assert_fact(**FACT, value="after the import")
        assert copy.chain_head().seq == 3
    assert _lines(tmp_path / "b.jsonl")[:2] == _lines(tmp_path / "a.jsonl")
    report = _verify(tmp_path / "b.jsonl")
    assert report.ok and report.genesis == 1, report.problems


def test_events_the_original_adds_later_are_covered_by_a_new_genesis(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        ledger.assert_fact(**FACT, value="ours")
    with open(path, "a") as fh:  # the original writes two events, without records
        fh.write("\n".join(ORIGINAL_LINES) + "\n")
    report = _verify(path)
    assert not report.ok and report.first is not None and report.first.seq == 2
    with Ledger(path) as ledger:
        ledger.assert_fact(**FACT, value="ours again")
    record = json.loads(_lines(path)[3])["chain"]
    assert record["seq"] == 4 and record["genesis"]["size"] == 3
    report = _verify(path)
    assert report.ok, report.problems
    assert any("events 2..3 were written without a chain record" in n for n in report.notes)


def _original_ledger(tmp_path: Path) -> tuple[Path, list[str]]:
    """A JSONL ledger of the original's two events (no chain record), and two more such lines
    (``e3``, ``e4``) for the original to write later."""
    path = tmp_path / "l.jsonl"
    path.write_text("\n".join(ORIGINAL_LINES) + "\n")
    return path, [line.replace('"e1"', '"e3"').replace('"e2"', '"e4"') for line in ORIGINAL_LINES]


def test_a_head_over_events_without_records_is_computed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ledger of the original's: its head is computed once, then remembered; when the
    original writes more, only its new events are read (back to the event the head follows)."""
    path, more = _original_ledger(tmp_path)
    with Ledger(path) as ledger:
        backend = ledger.backend
        first = ledger.chain_head()
        read: list[str] = []
        newest_first = backend.events_newest_first

        def counted() -> Iterator[Event]:
            for event in newest_first():  # type: ignore[union-attr]
                read.append(event.event_id)
                yield event

        monkeypatch.setattr(backend, "events_newest_first", counted)
        monkeypatch.setattr(backend, "stored_events", lambda: pytest.fail("read from the start"))
        assert ledger.chain_head() == first and read == []
        with open(path, "a") as fh:  # the original writes again
            fh.write("\n".join(more) + "\n")
        after = ledger.chain_head()
        assert read == ["e4", "e3", "e2"]
        monkeypatch.undo()
        assert after == head_after(backend.last_event(), backend.stored_events)
        assert after.seq == 4 and not after.chained
        ledger.assert_fact(**FACT, value="ours")
    report = _verify(path)
    assert report.ok and report.genesis == 5, report.problems


def test_a_head_is_the_one_after_the_event_it_was_asked_for(tmp_path: Path) -> None:
    """Another writer appends while the head after ``last`` is computed (on a ledger of the
    original's, a long pass): the events after ``last`` are not folded in, backwards or
    forwards, so the head remembered with ``last``'s id is the head after it."""
    path, more = _original_ledger(tmp_path)
    with Ledger(path) as ledger:
        backend = ledger.backend
        last = backend.last_event()
        expected = ledger.chain_head()
        with open(path, "a") as fh:  # the other writer, after ``last`` was read
            fh.write("\n".join(more) + "\n")
        backend.refresh()
        assert backend.last_event().event_id == "e4"  # type: ignore[union-attr]
        backwards = head_after(last, backend.stored_events, backend.events_newest_first)
        forwards = head_after(last, backend.stored_events)
    assert backwards == forwards == expected and expected.seq == 2

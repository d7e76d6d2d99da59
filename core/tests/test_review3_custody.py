"""Adversarial review of provable custody (third pass): edits that kept every hash.

Each test is an attack that ``verify`` accepted before its fix: the chain's canonical JSON maps
more than one stored text to the same bytes, so an edit between two such texts keeps every leaf
and commitment while readers see something else.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main
from agent_custody_state.ledger.verify import verify_lines


@pytest.mark.parametrize("number", ["1e400", "-1e999", "1" + "0" * 400, "-" + "9" * 330])
def test_a_null_edited_into_an_overflowing_number_fails(tmp_path: Path, number: str) -> None:
    """A number too large for a double reads as an infinity (Python, and JavaScript's
    ``JSON.parse``), which canonical JSON writes as ``null``: ``null`` edited into ``1e400``
    kept the commitment, and readers got ``inf`` where the writer stored null."""
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        ledger.assert_fact(subject="s", predicate="p", value={"a": None}, space="o", actor="a")
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace('"a":null', f'"a":{number}', 1), encoding="utf-8")
    report = verify_lines(path.read_bytes().splitlines())
    assert report.first is not None and report.first.seq == 1
    assert report.first.reason.startswith("not a valid JSON event (")
    assert "not a finite number" in report.first.reason


def test_a_null_confidence_edited_into_an_infinity_fails(tmp_path: Path) -> None:
    """The same in the leaf itself: ``"confidence":null`` read back as ``inf``."""
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        ledger.assert_fact(subject="s", predicate="p", value="v", space="o", actor="a")
        ledger.assert_fact(subject="t", predicate="p", value="w", space="o", actor="a")
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[1] = lines[1].replace('"confidence":null', '"confidence":-1e400', 1)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = verify_lines(path.read_bytes().splitlines())
    assert report.first is not None and report.first.seq == 2
    assert report.problem_count == 1


def test_a_key_twice_in_any_event_fails(tmp_path: Path) -> None:
    """A key put twice (the first copy forged, the last the one written) keeps every leaf: every
    reader of ours keeps the last. A reader keeping the first (SQLite's ``json_extract``, which
    fills and checks a SQL ledger's query columns) reads another event: the key twice is itself
    the problem, in any event, not only in a forgotten fact."""
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        fact = ledger.assert_fact(subject="s", predicate="p", value="v", space="o", actor="a")
        ledger.retract(fact_id=fact.fact_id, actor="a", reason="r")
        ledger.assert_fact(subject="t", predicate="p", value="w", space="o", actor="a")
    assert verify_lines(path.read_bytes().splitlines()).ok
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[0] = lines[0].replace('"subject":"s"', '"subject":"x","subject":"s"', 1)
    lines[1] = lines[1].replace('{"eventId"', '{"kind":"assert","eventId"', 1)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = verify_lines(path.read_bytes().splitlines())
    assert [p.seq for p in sorted(report.problems)] == [1, 2]
    assert all("a key appears twice in this event" in p.reason for p in report.problems)


def test_events_in_other_spellings_without_a_key_twice_still_verify(tmp_path: Path) -> None:
    """The check of duplicate keys takes a slower path for text that is not orjson's compact
    form (spaces, escapes, exponents): such text, with no key twice, is not a problem."""
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        ledger.assert_fact(
            subject="s", predicate="p", value=[100000, "\u00e9"], space="o", actor="a"
        )
    line = path.read_text(encoding="utf-8").splitlines()[0]
    spaced = line.replace('":', '": ', 3).replace("100000", "1e5").replace("\u00e9", "\\u00e9")
    assert spaced != line
    assert verify_lines([spaced]).ok
    assert verify_lines([spaced.encode()]).ok


def test_a_live_sealed_value_whose_key_is_gone_fails_verify_with_the_key_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The leaf leaves the value out, so an envelope's key id is covered by nothing but its
    key: edited to an id the key store does not hold, the fact read as null (erased without a
    forget) while ``verify`` with the key store exited 0 with a note that values were "not
    checked without their keys". A forget nulls the value, so a live envelope must open."""
    path = tmp_path / "l.jsonl"
    with Ledger(path, forget_mode="crypto-shred") as ledger:
        ledger.assert_fact(subject="s", predicate="p", value="secret", space="o", actor="a")
        gone = ledger.assert_fact(subject="t", predicate="p", value="bye", space="o", actor="a")
        ledger.forget(fact_id=gone.fact_id, actor="a", reason="gdpr")
    assert main(["verify", "--ledger", str(path)]) == 0  # a forgotten fact's key is gone: fine
    lines = path.read_text("utf-8").splitlines()
    kid = json.loads(lines[0])["fact"]["value"]["kid"]
    lines[0] = lines[0].replace(kid, "0" * 32, 1)
    path.write_text("\n".join(lines) + "\n", "utf-8")
    with Ledger(path, forget_mode="crypto-shred") as ledger:
        assert [f.value for f in ledger.as_of(subject="s")] == [None]
    capsys.readouterr()
    assert main(["verify", "--ledger", str(path)]) == 1
    out = capsys.readouterr().out
    assert "first bad event 1: the sealed value's key is not in the key store" in out
    assert main(["verify", "--ledger", str(path), "--forget-mode", "plain"]) == 0  # no keys


@pytest.mark.parametrize("encode", ["bom", "utf-16-le", "utf-32-be"])
def test_a_line_that_is_not_utf8_json_fails(tmp_path: Path, encode: str) -> None:
    """``json.loads`` of bytes also reads a UTF-8 byte order mark, UTF-16 and UTF-32, so a line
    re-encoded so kept every hash, while the original's ``JSON.parse`` of the line (and every
    UTF-8 reader) could no longer read it: no more intact than one holding ``NaN``."""
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        ledger.assert_fact(subject="s", predicate="p", value="v", space="o", actor="a")
        ledger.assert_fact(subject="t", predicate="p", value="w", space="o", actor="a")
    lines = path.read_bytes().splitlines()
    text = lines[1].decode("utf-8")
    lines[1] = b"\xef\xbb\xbf" + lines[1] if encode == "bom" else text.encode(encode)
    assert b"\n" not in lines[1]
    report = verify_lines(lines)
    assert report.first is not None and report.first.seq == 2
    assert report.first.reason.startswith("not a valid JSON event")

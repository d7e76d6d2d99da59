"""``verify``: every kind of tampering found at its event, checkpoints, and the two commands."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.cli import main
from agent_custody_state.keys import load_public_key
from agent_custody_state.ledger.chain import ChainHead, seal
from agent_custody_state.ledger.checkpoints import parse_checkpoint, read_checkpoints
from agent_custody_state.ledger.model import event_from_json
from agent_custody_state.ledger.verify import verify_lines
from agent_custody_state.server.signing import generate_key_pair

FACT = {"subject": "acct:42", "predicate": "plan", "space": "org", "actor": "agent"}


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    private, public, _ = generate_key_pair(tmp_path / "keys" / "memory.key")
    return private, public


@pytest.fixture
def ledger_path(tmp_path: Path, keys: tuple[Path, Path]) -> Path:
    """Ten events: asserts, a supersession, a retract, a forget; checkpoints every 4."""
    path = tmp_path / "l.jsonl"
    with Ledger(path, checkpoint_key=keys[0], checkpoint_every=4) as ledger:
        first = ledger.assert_fact(**FACT, value={"tier": "pro", "seats": 3.5})
        ledger.assert_many([{**FACT, "subject": f"s{i}", "value": i} for i in range(5)])
        ledger.assert_fact(**FACT, value="enterprise", supersedes=first.fact_id)
        ledger.retract(fact_id=first.fact_id, actor="a", reason="wrong")
        ledger.forget(fact_id=first.fact_id, actor="a", reason="erase")
        ledger.confirm(fact_id=ledger.as_of(subject="s0")[0].fact_id, actor="a")
    return path


def _report(path: Path, public: Path | None = None) -> object:
    cps = read_checkpoints(Path(f"{path}.checkpoints").read_text())
    key = load_public_key(public) if public else None
    return verify_lines(path.read_bytes().splitlines(), checkpoints=cps, public_key=key)


def _edit(path: Path, change: Callable[[list[str]], list[str]]) -> None:
    path.write_text("\n".join(change(path.read_text().splitlines())) + "\n")


def _json_edit(index: int, change: Callable[[dict[str, object]], None]) -> Callable[..., list[str]]:
    def edit(lines: list[str]) -> list[str]:
        data = json.loads(lines[index])
        change(data)
        lines[index] = json.dumps(data, separators=(",", ":"))
        return lines

    return edit


def test_an_untouched_ledger_verifies(ledger_path: Path, keys: tuple[Path, Path]) -> None:
    report = _report(ledger_path, keys[1])
    assert report.ok, report.problems  # type: ignore[attr-defined]
    assert report.events == 10 and report.checkpoints_checked == 2  # type: ignore[attr-defined]


def _fact(data: dict[str, object]) -> dict[str, object]:
    fact = data["fact"]
    assert isinstance(fact, dict)
    return fact


EDITS: dict[str, tuple[Callable[..., list[str]], int, str]] = {
    "value": (_json_edit(2, lambda d: _fact(d).update(value=7)), 3, "commitment"),
    "subject": (_json_edit(2, lambda d: _fact(d).update(subject="x")), 3, "leaf hash"),
    "unknown key added": (_json_edit(4, lambda d: d.update(more=1)), 5, "leaf hash"),
    "salt": (_json_edit(3, lambda d: _fact(d).pop("valueSalt")), 4, "salt is missing"),
    "leaf": (_json_edit(5, lambda d: d["chain"].update(leaf="0" * 64)), 6, "leaf hash"),  # type: ignore[index]
    "head": (_json_edit(5, lambda d: d["chain"].update(head="0" * 64)), 6, "chain head"),  # type: ignore[index]
    "chain record removed": (_json_edit(6, lambda d: d.pop("chain")), 7, "no chain record"),
    "forgotten digest": (
        _json_edit(0, lambda d: _fact(d)["forgotten"].update(valueDigest="0" * 64)),  # type: ignore[attr-defined]
        1,
        "forget event",
    ),
    "forged forget": (
        _json_edit(
            1, lambda d: _fact(d).update(value=None, forgotten={"at": "x", "digestKind": "none"})
        ),
        2,
        "no forget event",
    ),
    "deleted": (lambda lines: lines[:3] + lines[4:], 4, "deleted or inserted"),
    "swapped": (lambda lines: [*lines[:2], lines[5], *lines[3:5], lines[2], *lines[6:]], 3, "seq"),
    "truncated": (lambda lines: lines[:7], 8, "missing (truncated)"),
    "torn": (lambda lines: [*lines[:9], lines[9][:40]], 10, "not a valid JSON"),
}


@pytest.mark.parametrize("name", sorted(EDITS))
def test_each_edit_is_found_at_its_event(ledger_path: Path, name: str) -> None:
    change, seq, why = EDITS[name]
    _edit(ledger_path, change)
    report = _report(ledger_path)
    first = report.first  # type: ignore[attr-defined]
    assert first is not None, name
    assert (first.seq, why in first.reason) == (seq, True), first


def test_checkpoints_are_signed_and_checked(ledger_path: Path, keys: tuple[Path, Path]) -> None:
    notes = Path(f"{ledger_path}.checkpoints").read_text()
    cps = read_checkpoints(notes)
    assert [cp.size for cp in cps] == [6, 8]
    assert cps[0].note() + "\n" + cps[1].note() == notes
    assert cps[0].check_signature(load_public_key(keys[1])) is None
    _, other_pub, _ = generate_key_pair(ledger_path.parent / "other.key")
    assert "not signed by the key" in str(cps[0].check_signature(load_public_key(other_pub)))
    forged = parse_checkpoint(cps[0].note().replace("\n6\n", "\n5\n"))
    assert "does not verify" in str(forged.check_signature(load_public_key(keys[1])))
    # History rewritten from event 3 on, every leaf and head recomputed: only a checkpoint
    # (signed before the rewrite) can tell.
    lines = ledger_path.read_text().splitlines()
    events = [event_from_json(line) for line in lines]
    head = ChainHead(2, events[1].extra["chain"]["head"])
    changed = replace(events[2], fact=replace(events[2].fact, value=99))  # type: ignore[call-arg]
    resealed = seal(head, [changed, *events[3:]])
    _edit(ledger_path, lambda old: [*old[:2], *(e.to_json() for e in resealed)])
    assert verify_lines(ledger_path.read_bytes().splitlines()).ok
    report = verify_lines(ledger_path.read_bytes().splitlines(), checkpoints=cps)
    assert not report.ok and report.first is not None
    assert report.first.seq == 6 and "states another head" in report.first.reason


def test_checkpoint_every_needs_a_key(tmp_path: Path) -> None:
    with pytest.raises(LedgerError, match="checkpoint_key"):
        Ledger(tmp_path / "l.jsonl", checkpoint_every=10)
    with Ledger(tmp_path / "l.jsonl") as ledger, pytest.raises(LedgerError, match="no checkpoint"):
        ledger.checkpoint()


def test_the_commands(
    ledger_path: Path, keys: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["checkpoint", "--ledger", str(ledger_path), "--key", str(keys[0])]) == 0
    note = capsys.readouterr().out
    assert parse_checkpoint(note).size == 10
    assert main(["verify", "--ledger", str(ledger_path), "--key", str(keys[1])]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"ok: {ledger_path}: 10 events") and "3 checkpoint(s)" in out
    _edit(ledger_path, EDITS["value"][0])
    assert main(["verify", "--ledger", str(ledger_path), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["firstBad"]["seq"] == 3 and not data["ok"]
    # Broken JSON: the backend would refuse to open it; verify reads the lines itself.
    _edit(ledger_path, lambda lines: [*lines[:4], lines[4][:-3], *lines[5:]])
    assert main(["verify", "--ledger", str(ledger_path)]) == 1
    assert "first bad event 3" in capsys.readouterr().out
    missing = ledger_path.parent / "missing.jsonl"
    assert main(["verify", "--ledger", str(missing)]) == 1
    assert "no such ledger" in capsys.readouterr().err


def test_the_server_signs_checkpoints_with_its_key(
    tmp_path: Path, keys: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from agent_custody_state.config import load_config
    from agent_custody_state.server.runtime import open_runtime, startup_line

    path = tmp_path / "served.jsonl"
    config = load_config(ledger=str(path), key=str(keys[0]), checkpoint_every=2)
    runtime = open_runtime(config)
    try:
        for i in range(5):
            runtime.worker.call(runtime.ledger.assert_fact, **FACT, value=i)
        assert "chain checkpoints every 2 events" in startup_line(runtime, "stdio")
    finally:
        runtime.close()
    cps = read_checkpoints(Path(f"{path}.checkpoints").read_text())
    assert [cp.size for cp in cps] == [2, 4]
    assert main(["verify", "--ledger", str(path), "--key", str(keys[1])]) == 0
    # Without a key to sign with, the server refuses to start.
    refused = main(["serve", "--ledger", str(path), "--checkpoint-every", "5"])
    assert refused == 1
    assert "checkpoint_every needs key" in capsys.readouterr().err


# Values whose canonical text orjson does not write (JavaScript's number spelling, key order by
# UTF-16 units and array indexes first): verify's first try (orjson's sorted bytes against the
# recorded leaf and commitment) misses, and the canonical path must still accept them, or find
# an edit.
ODD_VALUES = [
    1e16,
    1.2345678901234568e20,
    -0.0,
    {"\U0001f600": 1, "\uff61": 2, "a": 3},
    {"10": "x", "9": "y", "b": [1.5, 2e-9]},
]


def test_values_orjson_does_not_write_canonically_verify(tmp_path: Path) -> None:
    from agent_custody_state import fastjson
    from agent_custody_state.canonical import canonical_utf8

    # The premise: for each value, orjson's sorted text is not the canonical text; nor for the
    # external ids, which are in the leaf (the values are in it through their commitments).
    external = {"\U0001f600": "x", "\uff61": "y"}
    assert all(fastjson.sorted_unchecked(v) != canonical_utf8(v) for v in [*ODD_VALUES, external])
    path = tmp_path / "odd.jsonl"
    with Ledger(path) as ledger:
        for i, value in enumerate(ODD_VALUES):
            odd_key = {**FACT, "subject": f"odd:{i}", "value": value}
            ledger.assert_fact(**odd_key, external=external)
    report = verify_lines(path.read_bytes().splitlines())
    assert report.ok and report.events == len(ODD_VALUES), report.problems
    lines = path.read_text().splitlines()
    data = json.loads(lines[3])
    data["fact"]["value"]["\uff61"] = 4  # an edit of an odd value: the commitment breaks
    lines[3] = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    report = verify_lines(line.encode() for line in lines)
    assert report.first is not None and report.first.seq == 4
    assert "commitment" in report.first.reason


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_a_null_edited_into_a_non_json_constant_fails(tmp_path: Path, constant: str) -> None:
    """Canonical JSON writes NaN and the infinities as ``null``, so ``null`` edited into one
    keeps every hash; but it is no longer JSON (the original's ``JSON.parse`` cannot read the
    line), and a reader of ours would see a number where the writer stored null."""
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        ledger.assert_fact(subject="s", predicate="p", value={"a": None}, space="o", actor="a")
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace('"a":null', f'"a":{constant}', 1), encoding="utf-8")
    report = verify_lines(path.read_bytes().splitlines())
    assert report.first is not None and report.first.seq == 1
    assert report.first.reason == f"not a valid JSON event ({constant} is not JSON)"


def test_an_erased_value_put_back_under_a_duplicate_key_fails(tmp_path: Path) -> None:
    """``"value":"secret"`` put before a forgotten assert's ``"value":null`` keeps every leaf
    (every reader of ours keeps the last of two keys) while the file holds the value again, and
    a reader keeping the first (SQLite's ``json_extract``) reads it."""
    path = tmp_path / "l.jsonl"
    with Ledger(path, forget_key="k") as ledger:
        fact = ledger.assert_fact(subject="s", predicate="p", value="secret", space="o", actor="a")
        ledger.assert_fact(subject="t", predicate="p", value="other", space="o", actor="a")
        ledger.forget(fact_id=fact.fact_id, actor="a", reason="erasure")
    assert verify_lines(path.read_bytes().splitlines()).ok
    lines = path.read_text(encoding="utf-8").splitlines()
    assert '"value":null' in lines[0]
    lines[0] = lines[0].replace('"value":null', '"value":"secret","value":null', 1)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = verify_lines(path.read_bytes().splitlines())
    assert report.first is not None and report.first.seq == 1
    assert "a key appears twice" in report.first.reason
    assert report.problem_count == 1


def test_a_key_with_no_checkpoint_to_check_says_it_binds_nothing(
    ledger_path: Path, keys: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The chain has no key: with the checkpoints deleted, the history may have been rewritten
    whole, so ``--key`` passing quietly would vouch for nothing."""
    Path(f"{ledger_path}.checkpoints").unlink()
    assert main(["verify", "--ledger", str(ledger_path), "--key", str(keys[1])]) == 0
    out, err = capsys.readouterr()
    assert "0 checkpoint(s)" in out
    assert "note: a public key was given but there is no checkpoint to check it against" in err
    assert main(["verify", "--ledger", str(ledger_path)]) == 0  # no key asked for: no note
    assert "no checkpoint to check" not in capsys.readouterr().err


def test_a_checkpoint_of_another_ledger_is_named_as_such(
    ledger_path: Path, keys: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A checkpoint signed (by the same key) for another ledger binds nothing of this one: it
    is named for what it is, not as a rewrite of this ledger's events, and its head is not
    compared. A ledger rewritten whole from a new first event reads the same against its old
    checkpoints: every one of them names the ledger it was signed for."""
    other = ledger_path.parent / "other.jsonl"
    with Ledger(other, checkpoint_key=keys[0], checkpoint_every=3) as ledger:
        for i in range(7):
            ledger.assert_fact(**{**FACT, "subject": f"o{i}"}, value=i)
    theirs = f"{other}.checkpoints"
    argv = ["verify", "--ledger", str(ledger_path), "--checkpoint", theirs, "--json"]
    assert main([*argv, "--key", str(keys[1])]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["firstBad"]["seq"] == 3 and data["problemCount"] == 2, data
    reason = data["firstBad"]["reason"]
    assert reason.startswith("the checkpoint of size 3 was signed for another ledger"), reason
    first_id = json.loads(other.read_text().splitlines()[0])["eventId"]
    assert f"agent-custody-state/chain/{first_id}; this one is" in reason
    assert "states another head" not in json.dumps(data)
    # This ledger with its own checkpoints and the other's: only the other's are named.
    argv[4:5] = [f"{ledger_path}.checkpoints", "--checkpoint", theirs]
    assert main(argv) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["problemCount"] == 2 and data["checkpoints"] == 4
    # Rewritten whole: another history written in its place, its own chain intact.
    ledger_path.unlink()
    with Ledger(ledger_path) as ledger:
        ledger.assert_many([{**FACT, "subject": f"r{i}", "value": i} for i in range(10)])
    assert verify_lines(ledger_path.read_bytes().splitlines()).ok  # no checkpoint: it passes
    assert main(["verify", "--ledger", str(ledger_path), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["problemCount"] == 2 and "signed for another ledger" in data["firstBad"]["reason"]

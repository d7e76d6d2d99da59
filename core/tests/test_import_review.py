"""Review of export, import and repair (JSONL): an import accepts only what ``verify`` would
accept, lands whole or not at all, and an export never writes over its own ledger."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.cli import main
from agent_custody_state.ledger.model import event_from_json


def _source(tmp_path: Path) -> Path:
    path = tmp_path / "src.jsonl"
    with Ledger(path) as ledger:
        facts = [
            ledger.assert_fact(
                subject=f"s{i}", predicate="p", value=f"v{i}", space="org", actor="a"
            )
            for i in range(3)
        ]
        ledger.forget(fact_id=facts[1].fact_id, actor="a", reason="r")
    return path


def _lines(tmp_path: Path) -> list[str]:
    return _source(tmp_path).read_text("utf-8").splitlines()


def _edited(lines: list[str]) -> list[str]:
    data = json.loads(lines[2])
    data["fact"]["value"] = "not what was written"
    return [*lines[:2], json.dumps(data, separators=(",", ":")), *lines[3:]]


BROKEN = {
    "reordered": (
        lambda ls: [ls[1], ls[0], *ls[2:]],
        "event 1: the chain record says seq 2 but this is event 1",
    ),
    "value edited": (_edited, "event 3: the value does not match its commitment"),
    "first event dropped": (
        lambda ls: ls[1:],
        "event 1: the chain record says seq 2 but this is event 1",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_an_export_whose_chain_verify_refuses_is_not_imported(tmp_path: Path, case: str) -> None:
    edit, message = BROKEN[case]
    events = [event_from_json(line) for line in edit(_lines(tmp_path))]
    with Ledger(tmp_path / "to.jsonl") as ledger:
        with pytest.raises(LedgerError, match=message) as caught:
            ledger.import_events(events)
        assert caught.value.code == "bad_export" and ledger.count() == 0


@pytest.mark.parametrize("case", list(BROKEN))
def test_the_command_refuses_a_broken_chain_before_creating_the_ledger(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    edit, message = BROKEN[case]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(edit(_lines(tmp_path))) + "\n", "utf-8")
    to = tmp_path / "to.jsonl"
    assert main(["import", "--ledger", str(to), "--from", str(bad)]) == 1
    err = capsys.readouterr().err
    assert message in err and err.endswith("; nothing imported\n")
    assert not to.exists()


def test_an_intact_export_still_imports_byte_for_byte(tmp_path: Path) -> None:
    source = _source(tmp_path)
    out, to = tmp_path / "out.jsonl", tmp_path / "to.jsonl"
    assert main(["export", "--ledger", str(source), "--out", str(out)]) == 0
    assert main(["import", "--ledger", str(to), "--from", str(out)]) == 0
    assert to.read_bytes() == source.read_bytes() == out.read_bytes()
    assert main(["verify", "--ledger", str(to)]) == 0


def test_envelopes_are_refused_into_a_crypto_shred_ledger_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An export in plain mode of a crypto-shred ledger holds envelopes whose keys stay in the
    source's key store: a crypto-shred target sealed each envelope again and read it back as
    the fact's value (and ``verify`` then failed on its commitment)."""
    source = tmp_path / "cs.jsonl"
    with Ledger(source, forget_mode="crypto-shred") as ledger:
        ledger.assert_fact(subject="s", predicate="p", value="secret", space="org", actor="a")
    sealed = tmp_path / "sealed.jsonl"
    args = ["export", "--ledger", str(source), "--forget-mode", "plain", "--out", str(sealed)]
    assert main(args) == 0
    to = tmp_path / "to.jsonl"
    args = ["import", "--ledger", str(to), "--forget-mode", "crypto-shred", "--from", str(sealed)]
    assert main(args) == 1
    assert "holds a crypto-shred envelope, not a value" in capsys.readouterr().err
    assert not to.exists()


def test_export_refuses_to_write_over_its_own_ledger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--force`` replaces an existing file, but never the ledger being read or its key store:
    the export of a crypto-shred ledger holds its values decrypted, and it replaced the ledger
    (plaintext where envelopes were) or the key store (every key gone)."""
    source = tmp_path / "cs.jsonl"
    with Ledger(source, forget_mode="crypto-shred") as ledger:
        ledger.assert_fact(subject="s", predicate="p", value="secret", space="org", actor="a")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    for target in (source, tmp_path / "cs.jsonl.keys", tmp_path / "cs.jsonl.mode"):
        args = ["export", "--ledger", str(source), "--out", str(target), "--force"]
        assert main(args) == 1
        assert "is a file of the ledger" in capsys.readouterr().err
    link = tmp_path / "link.jsonl"
    link.symlink_to(source)
    assert main(["export", "--ledger", str(source), "--out", str(link), "--force"]) == 1
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p != link} == before
    assert b"secret" not in source.read_bytes()


# -- an import interrupted, or raced by another writer ------------------------------------------

N = 24_000  # several of import_events' batches (5,000)

IMPORT = """
import sys
from agent_custody_state.cli import main
sys.exit(main(["import", "--ledger", sys.argv[1], "--from", sys.argv[2]]))
"""

WRITE = """
import os, sys, time
from agent_custody_state import Ledger
while not (os.path.exists(sys.argv[1]) and os.path.getsize(sys.argv[1])):
    time.sleep(0.0005)  # the import has written (some of) its events
with Ledger(sys.argv[1]) as ledger:
    for i in range(20):
        ledger.assert_fact(subject=f"w{i}", predicate="p", value=i, space="org", actor="w")
"""


def _big_export(tmp_path: Path) -> Path:
    source = tmp_path / "big.jsonl"
    with Ledger(source) as ledger:
        for start in range(0, N, 4000):
            ledger.assert_many(
                [
                    {"subject": f"s{i}", "predicate": "p", "value": i, "space": "org", "actor": "a"}
                    for i in range(start, start + 4000)
                ]
            )
    out = tmp_path / "big-export.jsonl"
    assert main(["export", "--ledger", str(source), "--out", str(out)]) == 0
    return out


def _spawn(script: str, *args: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _wait_for_bytes(path: Path, proc: subprocess.Popen[bytes]) -> bool:
    """Poll until ``path`` holds bytes; False when ``proc`` ended first."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if path.exists() and path.stat().st_size:
            return True
        if proc.poll() is not None:
            return path.exists() and path.stat().st_size > 0
        time.sleep(0.0005)
    raise AssertionError("the import wrote nothing in 60 s")


def test_an_import_killed_mid_way_leaves_all_or_nothing(tmp_path: Path) -> None:
    export = _big_export(tmp_path)
    to = tmp_path / "to.jsonl"
    proc = _spawn(IMPORT, to, export)
    _wait_for_bytes(to, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with Ledger(to) as ledger:
        count = ledger.count()
    assert count in (0, N), f"a killed import left {count} of {N} events"
    if count == 0:  # nothing stands in the way of importing again
        assert main(["import", "--ledger", str(to), "--from", str(export)]) == 0
    assert main(["verify", "--ledger", str(to)]) == 0


def test_a_writer_cannot_slip_between_an_imports_events(tmp_path: Path) -> None:
    export = _big_export(tmp_path)
    to = tmp_path / "to.jsonl"
    writer = _spawn(WRITE, to)
    importer = _spawn(IMPORT, to, export)
    assert writer.wait(120) == 0, writer.stderr.read() if writer.stderr else ""
    importer.wait(120)
    assert main(["verify", "--ledger", str(to)]) == 0
    with Ledger(to) as ledger:
        kinds = ["w" if e.fact.actor == "w" else "i" for e in ledger.export()]  # type: ignore[attr-defined]
    if importer.returncode == 0:
        assert "".join(kinds) == "i" * N + "w" * 20
    else:
        assert kinds == ["w"] * 20


# -- repair --------------------------------------------------------------------------------------


def test_repair_cuts_the_torn_tail_only_and_a_finished_batch_is_kept_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _source(tmp_path)
    whole = path.read_bytes()
    with path.open("ab") as fh:
        fh.write(b'{"eventId":"torn","kind":"ass')
    assert main(["repair", "--ledger", str(path)]) == 0
    assert "torn final line" in capsys.readouterr().out
    assert path.read_bytes() == whole
    assert main(["repair", "--ledger", str(path)]) == 0
    assert capsys.readouterr().out.endswith("nothing to repair\n")
    # A writer killed after its batch reached the disk, before it removed the journal: the
    # batch stands, once, and the journal goes.
    with Ledger(path) as ledger:
        ledger.assert_many(
            [
                {"subject": f"b{i}", "predicate": "p", "value": i, "space": "o", "actor": "a"}
                for i in range(3)
            ]
        )
    after = path.read_bytes()
    journal = tmp_path / "src.jsonl.batch"
    journal.write_text(json.dumps({"offset": len(whole), "length": len(after) - len(whole)}))
    assert main(["repair", "--ledger", str(path)]) == 0
    assert not journal.exists() and path.read_bytes() == after
    with Ledger(path) as ledger:
        assert ledger.count() == 7
    assert main(["verify", "--ledger", str(path)]) == 0

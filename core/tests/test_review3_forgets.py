"""Third review: a forgotten value put back. A forget changes no leaf (docs/proofs.md), so the
assert's line as it was before the forget (value, salt, no ``forgotten``), copied back from a
backup, kept every leaf, head and checkpoint: ``verify`` exited 0 while the ledger served the
erased value again (``Ledger.get``). The same for an assert appended under a forgotten fact's
id. Only the forget event tells the value must be gone: ``verify`` now pairs them."""

from __future__ import annotations

import json
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path

from agent_custody_state import Ledger
from agent_custody_state.ledger.parallel import verify_parallel, worker_pool
from agent_custody_state.ledger.verify import verify_lines

SECRET = "dana.private@example.org"


def _ledger(path: Path, forget_mode: str = "plain") -> tuple[str, list[str]]:
    """Nine events: the secret asserted first, others, its forget at event 6, others. Returns
    the fact id and the assert's line as it was before the forget."""
    with Ledger(path, forget_mode=forget_mode) as ledger:
        fact = ledger.assert_fact(subject="s", predicate="p", value=SECRET, space="o", actor="a")
        for i in range(4):
            ledger.assert_fact(subject=f"t{i}", predicate="p", value=i, space="o", actor="a")
    before = path.read_text(encoding="utf-8").splitlines()
    with Ledger(path, forget_mode=forget_mode) as ledger:
        ledger.forget(fact_id=fact.fact_id, actor="dpo", reason="gdpr")
        for i in range(3):
            ledger.assert_fact(subject=f"u{i}", predicate="p", value=i, space="o", actor="a")
    return fact.fact_id, before


def test_an_assert_copied_back_from_before_its_forget_fails_verify(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    fact_id, before = _ledger(path)
    assert verify_lines(path.read_bytes().splitlines()).ok
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[0] = before[0]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with Ledger(path) as ledger:
        served = ledger.get(fact_id)
        assert served is not None and served.value == SECRET  # served again
    report = verify_lines(path.read_bytes().splitlines())
    assert report.first is not None and report.first.seq == 1
    assert report.first.reason.startswith("the fact holds a value, but a forget event (6)")
    assert report.problem_count == 1


def test_an_assert_appended_under_a_forgotten_facts_id_fails_verify(tmp_path: Path) -> None:
    """Appended as the original writes events (no chain record, no commitment), a genesis
    covering it at the next write: the chain verifies, the file holds the value again."""
    path = tmp_path / "l.jsonl"
    _, before = _ledger(path)
    again = json.loads(before[0])
    del again["chain"]
    again["eventId"] = "11111111-1111-4111-8111-111111111111"
    for key in ("valueSalt", "valueCommitment"):
        del again["fact"][key]
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(again, separators=(",", ":")) + "\n")
    with Ledger(path) as ledger:
        ledger.assert_fact(subject="v", predicate="p", value=1, space="o", actor="a")
    report = verify_lines(path.read_bytes().splitlines())
    assert [p.seq for p in report.problems] == [10]
    assert "a forget event (6) erased it" in report.problems[0].reason


def test_a_crypto_shred_envelope_copied_back_fails_verify(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    _, before = _ledger(path, "crypto-shred")
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[0] = before[0]
    report = verify_lines(line.encode() for line in lines)  # without the key store
    assert report.first is not None and report.first.seq == 1
    assert "a forget event (6) erased it" in report.first.reason


def test_workers_report_what_one_process_reports(tmp_path: Path) -> None:
    """The assert in the first chunk, its forget in the second: the chunks are clean on their
    own, the pairing happens once they are merged."""
    path = tmp_path / "l.jsonl"
    _, before = _ledger(path)
    lines = path.read_bytes().splitlines()
    lines[0] = before[0].encode()
    expected = verify_lines(lines)
    assert not expected.ok
    pool: ProcessPoolExecutor
    with worker_pool(2) as pool:
        for chunk in (2, 3, 4):
            stats: dict[str, int] = {}
            report = verify_parallel(lines, executor=pool, chunk=chunk, stats=stats)
            assert asdict(report) == asdict(expected)
            assert stats["merged"] >= 1
    # The pool verify makes itself (forked here: the workers' fingerprints are Python's hash).
    for chunk in (2, 3):
        stats = {}
        report = verify_parallel(lines, jobs=2, chunk=chunk, stats=stats)
        assert asdict(report) == asdict(expected)
        assert stats["merged"] >= 1

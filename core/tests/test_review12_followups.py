"""Twelfth review, follow-ups of the day's fixes (docs/decisions.md, twelfth review).

- ``plan_sweep`` and ``current_external`` read one snapshot, as ``timeline``, ``status`` and
  ``facts`` do: with another thread's writes run between two of their questions, they answer
  as before the writes or as after them, never a mix (``test_review12_snapshots``'s race,
  deterministic, no sleeps);
- a sweep a fact stops part-way gives the facts it forgot before full certificates (the byte
  scan run after the compaction of what it forgot), not the ``recovered`` ones of an intent;
  a fact whose forget committed and then failed is still reported (and certified from the
  intent).
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger import forgetting
from agent_custody_state.ledger.errors import EventBackendError
from agent_custody_state.server.signing import generate_key_pair
from agent_custody_state.stores.flows import Custody

sys.path.insert(0, str(Path(__file__).parent))
from test_review12_snapshots import FACT, _either, ledger  # noqa: F401

LATER = "2999-01-01T00:00:00Z"


def test_a_sweep_plan_reads_one_state(ledger: Ledger) -> None:  # noqa: F811
    """``plan_sweep`` listed the facts, then asked their holds: a fact asserted and a hold
    placed in between gave a plan that forgets nothing and keeps the first fact, a state the
    ledger never had (before: forget the first; after: forget the new one, keep the first)."""
    first = ledger.assert_fact(subject="s", value=1, **FACT).fact.fact_id

    def read() -> tuple[list[str], list[str]]:
        plan = ledger.plan_sweep(LATER)
        return [e.fact_id for e in plan.forget], plan.held

    def write() -> None:
        ledger.assert_fact(subject="t", value=2, **FACT)
        ledger.hold(fact_id=first, actor="a", reason="audit")

    _either(ledger, "events_for", read, write)


def test_where_the_stores_hold_a_fact_reads_one_state(ledger: Ledger) -> None:  # noqa: F811
    """``current_external`` walked the facts superseding it, then read their events: a put-back
    recorded on a fact it had walked, and a later one on a fact it had not, gave the first
    put-back's ids, which the stores held at no moment (before: the assert's; after: the
    second put-back's)."""
    fact = ledger.assert_fact(subject="s", value=1, external={"vec": "x"}, **FACT).fact.fact_id
    newer = ledger.assert_fact(subject="s", value=2, supersedes=fact, **FACT).fact.fact_id

    def put_back(fact_id: str, external: str) -> None:
        restored = {"factId": fact, "external": {"vec": external}}
        ledger.retract(fact_id=fact_id, actor="a", reason="r", extra={"restored": restored})

    def write() -> None:
        put_back(newer, "y")
        third = ledger.assert_fact(subject="s", value=3, supersedes=fact, **FACT).fact.fact_id
        put_back(third, "z")

    _either(ledger, "events_for", lambda: ledger.current_external(fact), write)


def _predicate(path: Path) -> dict[str, Any]:
    envelope = json.loads(path.read_bytes())
    return json.loads(base64.b64decode(envelope["payload"]))["predicate"]  # type: ignore[no-any-return]


def _third_forget_fails(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The third fact a forget reaches stops it as a full disk does (the JSONL backend's
    refusal, before anything of that fact is written); the ids reached, in order."""
    real = forgetting.LedgerForgetting._forget
    calls: list[str] = []

    def third_fails(self: Any, fact_id: str, *args: Any, **kw: Any) -> Any:
        calls.append(fact_id)
        if len(calls) == 3:
            raise EventBackendError(
                f"could not forget {fact_id} in l.jsonl: [Errno 27] File too large; "
                "the ledger is unchanged"
            )
        return real(self, fact_id, *args, **kw)

    monkeypatch.setattr(forgetting.LedgerForgetting, "_forget", third_fails)
    return calls


def _world(tmp_path: Path, count: int) -> tuple[Path, Path, Path, list[str]]:
    path, folder = tmp_path / "l.jsonl", tmp_path / "certs"
    folder.mkdir()
    key, _, _ = generate_key_pair(tmp_path / "k.key")
    with Ledger(path) as book:
        ids = [
            book.assert_fact(subject=f"u{n}", value=f"{n}.secret@example.org", **FACT).fact.fact_id
            for n in range(count)
        ]
    return path, folder, Path(key), ids


def test_a_stopped_ledger_sweep_certifies_what_it_forgot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Ledger.sweep`` stopped by a fact: the exception carries the facts forgotten before it,
    each with its full certificate (its chain heads, a byte scan after their compaction).
    Before: the certificates were made after the last forget, so the stop left none."""
    path, _, key, ids = _world(tmp_path, 4)
    calls = _third_forget_fails(monkeypatch)
    with Ledger(path) as book, pytest.raises(EventBackendError) as stopped:
        book.sweep(before=LATER, actor="dpo", reason="r", certificates=_options(key))
    done = stopped.value.sweep_result  # type: ignore[attr-defined]
    assert [e.fact_id for e in done.forgotten] == calls[:2] == ids[:2]
    assert sorted(done.certificates) == sorted(calls[:2])
    for fact_id in calls[:2]:
        scan = done.certificates[fact_id].predicate["verification"]["byteScan"]
        assert scan["filesScanned"] >= 1 and scan["hits"] == 0, scan


def _options(key: Path) -> Any:
    from agent_custody_state.ledger.certificate import CertificateOptions
    from agent_custody_state.server.signing import SigningIdentity

    return CertificateOptions(key=SigningIdentity.load(str(key)).private_key)


def test_a_sweep_a_fact_stopped_keeps_full_certificates_of_those_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flow's answer and its folder hold the full certificates of the facts forgotten
    before the stop; before this, only ``recovered`` ones (byte scan not run, stores unknown)
    issued at the flow's end from its intent."""
    path, folder, key, ids = _world(tmp_path, 4)
    calls = _third_forget_fails(monkeypatch)
    with Ledger(path) as book:
        custody = Custody(book, certificate_key=str(key), certificates=folder)
        with pytest.raises(EventBackendError) as stopped:
            anyio.run(lambda: custody.sweep(before=LATER, actor="dpo", reason="r"))
    report = stopped.value.swept  # type: ignore[attr-defined]
    assert [s.event.fact_id for s in report.forgotten] == calls[:2]
    assert all(s.certificate is not None for s in report.forgotten)  # in the answer too
    kept = sorted(folder.glob("*.json"))
    assert sorted(p.stem for p in kept) == sorted(calls[:2])
    for path in kept:
        got = _predicate(path)
        assert "recovered" not in got, got["recovered"]
        assert got["verification"]["byteScan"]["filesScanned"] >= 1
    assert list(folder.glob(".intent-*")) == []
    assert set(ids) - set(calls[:2])  # the others wait for the next sweep


def test_a_forget_that_committed_then_failed_is_still_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second forget is written but its directory cannot be synced: that fact is forgotten
    though its forget failed. The flow reports it with the one before (full certificate) and
    issues its certificate from the intent (``recovered``), as before the ledger's account."""
    from agent_custody_state.backends import jsonl
    from agent_custody_state.backends.jsonl_recovery import fsync_dir as real

    path, folder, key, ids = _world(tmp_path, 3)
    synced: list[Any] = []

    def second_fails(folder: Any) -> None:
        synced.append(folder)
        if len(synced) == 2:
            raise OSError(5, "Input/output error")
        real(folder)

    monkeypatch.setattr(jsonl, "_fsync_dir", second_fails)
    with Ledger(path) as book:
        custody = Custody(book, certificate_key=str(key), certificates=folder)
        with pytest.raises(EventBackendError, match="could not sync") as stopped:
            anyio.run(lambda: custody.sweep(before=LATER, actor="dpo", reason="r"))
    report = stopped.value.swept  # type: ignore[attr-defined]
    assert [s.event.fact_id for s in report.forgotten] == ids[:2]
    first, second = (_predicate(folder / f"{fact}.json") for fact in ids[:2])
    assert "recovered" not in first and "recovered" in second


def test_a_stop_whose_certificates_cannot_be_made_still_says_what_it_forgot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The certificates at the stop fail (a file that cannot be read): the error that stopped
    the sweep is the one raised, and it still carries the facts forgotten, without
    certificates (the flow then issues ``recovered`` ones from its intent)."""
    path, _, key, ids = _world(tmp_path, 4)
    _third_forget_fails(monkeypatch)

    def unreadable(*_: Any, **__: Any) -> Any:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(forgetting.LedgerForgetting, "_certify", unreadable)
    with Ledger(path) as book, pytest.raises(EventBackendError, match="File too large") as stopped:
        book.sweep(before=LATER, actor="dpo", reason="r", certificates=_options(key))
    done = stopped.value.sweep_result  # type: ignore[attr-defined]
    assert [e.fact_id for e in done.forgotten] == ids[:2] and done.certificates == {}

"""The operator's extras at scale (nineteenth review): each reads the ledger and the receipts a
bounded number of times per run, not once per receipt or per round of a walk.

Shown by counting, never by timing: how many times the backend is asked for every assert (a
pass over the whole ledger), how many receipt files are read, how many times a walk goes over
the receipts. Before, ``review --out`` asked for every assert about seven times per receipt
(its pack, each written fact's blast radius, its erasures twice), read every receipt file once
per receipt, and ``blast`` went over every receipt once per round of its walk.
"""

from __future__ import annotations

import base64
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent / "extras"))
from gatewaysim import Gateway, seeded, text_result

from agent_custody_state.extras import bundles
from agent_custody_state.extras.blast import blast_radius
from agent_custody_state.extras.bundles import ReceiptSummary, load_summaries
from agent_custody_state.extras.explain import build_action_pack
from agent_custody_state.extras.ledgerview import all_facts, believed_ids
from agent_custody_state.extras.review import ReviewOptions, receipt_page, served_bundle
from agent_custody_state.extras.review_server import write_review
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.model import Fact, RetractEvent

PER_CALL = 2  # facts each write receipt writes


def _rid(i: int) -> str:
    return f"{i:08x}-0000-4000-8000-{i:012x}"


def _site(root: Path, calls: int, forgets: int) -> tuple[Path, Path, list[str]]:
    """A receipts directory of ``calls`` writes, each shown what the one before wrote (a chain
    as deep as there are calls), and a JSONL ledger of their facts, ``forgets`` of them
    forgotten. Returns (receipts, ledger, fact ids in order)."""
    receipts = root / "receipts"
    receipts.mkdir()
    gw = Gateway(receipts, seeded(1), seeded(2))
    ids: list[str] = []
    path = root / "ledger.jsonl"
    with Ledger(path) as ledger:
        for i in range(calls):
            rid = _rid(i + 1)
            wrote = ledger.assert_many(
                [
                    {
                        "subject": f"acct:{i}",
                        "predicate": f"p{k}",
                        "value": f"SECRET-{i}-{k}",
                        "space": "org",
                        "actor": "agent",
                        "receipt_id": rid,
                    }
                    for k in range(PER_CALL)
                ]
            )
            gw.seen = ids[-PER_CALL:]
            args = {"subject": f"acct:{i}", "predicate": "p0", "value": f"SECRET-{i}-0"}
            gw.call(
                rid,
                f"2026-09-01T10:{i // 60:02d}:{i % 60:02d}.000Z",
                "memory.write",
                args,
                text_result({"written": [e.fact.to_dict() for e in wrote]}),
            )
            ids += [e.fact_id for e in wrote]
        for fact_id in ids[:forgets]:
            ledger.forget(fact_id=fact_id, actor="user:admin", reason="erasure request")
    return receipts, path, ids


class _Counts:
    """Passes over every assert the backend answered (a listing by no key: ``facts``, an
    as-of of everything), and receipt files read."""

    def __init__(self, ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
        self.asserts = 0
        self.files = 0
        backend = ledger.backend
        find, read = backend.find_asserts, bundles.read_bytes

        def find_asserts(**filters: Any) -> Any:
            if not any(filters.get(k) for k in ("space", "subject", "predicate")):
                self.asserts += 1
            return find(**filters)

        def read_bytes(path: Path) -> bytes:
            self.files += 1
            return read(path)

        monkeypatch.setattr(backend, "find_asserts", find_asserts)
        monkeypatch.setattr(bundles, "read_bytes", read_bytes)


def _review_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, calls: int) -> _Counts:
    root = tmp_path / f"n{calls}"
    root.mkdir()
    receipts, path, _ = _site(root, calls, forgets=calls)
    with Ledger(path, read_only=True) as ledger, monkeypatch.context() as patch:
        counts = _Counts(ledger, patch)
        assert write_review(ReviewOptions(str(receipts), ledger), root / "pages") == {
            "receipts": calls
        }
    page = json.loads((root / "pages" / "r" / f"{_rid(1)}.json").read_text())
    assert "SECRET-0-0" not in _statement(page)  # the forgotten values are still hidden
    return counts


def test_review_out_reads_the_ledger_once_per_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four receipts or twelve, with as many forgets: the ledger is listed the same number of
    times (a snapshot: its facts, what is believed). Before: 7 times per receipt (28 and 84)."""
    small = _review_counts(tmp_path, monkeypatch, 4)
    large = _review_counts(tmp_path, monkeypatch, 12)
    assert small.asserts == large.asserts <= 2, (small.asserts, large.asserts)


def test_review_out_reads_each_receipt_file_a_bounded_number_of_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The receipts are listed, summarised once for the run, and each page reads its own
    receipt and the one its ``.json`` holds: 4 reads a receipt. Before, every page read every
    receipt file (the summaries) and each later call's (the pack's downstream receipts)."""
    for calls in (4, 12):
        counts = _review_counts(tmp_path, monkeypatch, calls)
        assert counts.files <= 4 * calls, (calls, counts.files)


class _Passes(list[ReceiptSummary]):
    """The receipts' summaries, counting how many times a walk goes over them."""

    passes = 0

    def __iter__(self) -> Iterator[ReceiptSummary]:
        self.passes += 1
        return super().__iter__()


def test_blast_goes_over_the_receipts_a_bounded_number_of_times(tmp_path: Path) -> None:
    """A chain of ten calls, each shown what the one before wrote: the walk from the first fact
    has ten rounds. Before, each round went over every receipt (11 passes); now the receipts
    are indexed by what they were shown, once."""
    receipts, path, ids = _site(tmp_path, 10, forgets=0)
    summaries = _Passes(load_summaries(receipts))
    with Ledger(path, read_only=True) as ledger:
        radius = blast_radius(ledger, summaries, ids[0])
    assert len(radius.receipts) == 9 and len(radius.derived_facts) == 18
    assert summaries.passes <= 2, summaries.passes


def test_explain_reads_the_ledger_once_whatever_the_call_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call that wrote several facts: one listing of the ledger for the pack, not one for the
    pack and two per fact (each fact's blast radius)."""
    receipts, path, _ = _site(tmp_path, 3, forgets=0)
    with Ledger(path, read_only=True) as ledger:
        counts = _Counts(ledger, monkeypatch)
        pack = build_action_pack(receipts, _rid(1), ledger)
    assert len(pack["written"]) == PER_CALL and len(pack["downstream"]["receipts"]) == 2
    assert counts.asserts <= 2, counts.asserts  # before: 1 + 2 * PER_CALL (5)


def test_a_review_run_never_shows_a_value_forgotten_during_the_run(tmp_path: Path) -> None:
    """The run's snapshot is used only while the ledger holds the events it was read from: a
    forget committed (here by another ledger object, as by another process) between two pages
    is hidden from the next page and its ``.json`` on."""
    from agent_custody_state.extras.review import ReviewRun

    receipts, path, ids = _site(tmp_path, 3, forgets=0)
    with Ledger(path) as ledger:
        o = ReviewOptions(str(receipts), ledger)
        run = ReviewRun(o)
        before = receipt_page(o, _rid(2), "/", "raw", run)
        assert "SECRET-1-0" in before and "SECRET-1-0" in _statement(served_bundle(o, _rid(2), run))
        with Ledger(path) as other:
            other.forget(fact_id=ids[2], actor="user:admin", reason="erasure request")
        after = receipt_page(o, _rid(2), "/", "raw", run)
        assert "SECRET-1-0" not in after and "(erased)" in after
        assert "SECRET-1-0" not in _statement(served_bundle(o, _rid(2), run))


def _statement(bundle: Any) -> str:
    return base64.b64decode(bundle["envelope"]["payload"]).decode()


def _reference(
    facts: list[Fact], believed: set[str], receipts: list[ReceiptSummary], fact_id: str
) -> tuple[list[Any], list[str], list[str]]:
    """The walk as the original computes it (round by round over everything)."""
    seen, hit, derived = {fact_id}, {}, {}
    grew = True
    while grew:
        grew = False
        for r in receipts:
            if r.receipt_id in hit or not any(
                (isinstance(i, str | int | float | bool) or i is None) and i in seen
                for i in r.consumed
            ):
                continue
            hit[r.receipt_id] = r
            grew = True
        for f in facts:
            source = f.source.receipt_id
            if f.fact_id == fact_id or f.fact_id in derived or not source or source not in hit:
                continue
            derived[f.fact_id] = f
            seen.add(f.fact_id)
            grew = True
    ordered = sorted(
        hit.values(), key=lambda r: r.timestamp if isinstance(r.timestamp, str) else ""
    )
    return (
        [id(r) for r in ordered],
        list(derived),
        [i for i in derived if i in believed],
    )


@pytest.mark.parametrize("seed", range(12))
def test_the_indexed_walk_is_the_originals(seed: int) -> None:
    """Random receipts and facts (shared timestamps, duplicate receipt ids, ids shown twice,
    a non-string id shown, retractions): the indexed walk answers exactly what the original's
    rounds did, in the same order."""
    rnd = random.Random(seed)
    with Ledger("memory:") as ledger:
        ids: list[str] = []
        summaries: list[ReceiptSummary] = []
        for n in range(40):
            rid = _rid(rnd.randrange(1, 30))  # some receipt ids repeat
            shown: list[Any] = rnd.sample(ids, k=min(len(ids), rnd.randrange(0, 3)))
            shown += rnd.sample([ids[0] if ids else 1, 1, None], k=rnd.randrange(0, 2))
            ts = f"2026-09-01T10:00:{rnd.randrange(0, 20):02d}.000Z"
            summaries.append(ReceiptSummary(rid, ts, "memory.write", "executed", shown))
            if rnd.random() < 0.8:
                [e] = ledger.assert_many(
                    [
                        {
                            "subject": f"s{n}",
                            "predicate": "p",
                            "value": n,
                            "space": "org",
                            "actor": "a",
                            "receipt_id": rid,
                        }
                    ]
                )
                ids.append(e.fact_id)
        for fact_id in rnd.sample(ids, k=5):
            ledger.retract(fact_id=fact_id, actor="a", reason="r")
        summaries.sort(key=lambda s: s.timestamp)
        facts, believed = all_facts(ledger), believed_ids(ledger)
        for root in rnd.sample(ids, k=8):
            got = blast_radius(ledger, summaries, root)
            receipts, derived, still = _reference(facts, believed, summaries, root)
            assert [id(r) for r in got.receipts] == receipts
            assert [f.fact_id for f in got.derived_facts] == derived
            assert [f.fact_id for f in got.still_believed] == still
            retracted = any(isinstance(e, RetractEvent) for e in ledger.history(root))
            assert (got.retraction is not None) == retracted


def _chain_site(ledger: Ledger, seed: int, links: int) -> tuple[str, list[ReceiptSummary]]:
    """A root fact and calls each shown the one before's fact, writing replacements of a few
    keys (each call updates a value the one before wrote), some retracted or forgotten
    beforehand. Fact ids are drawn from ``seed``, so two ledgers built alike hold the same."""
    rnd = random.Random(seed)
    fid = lambda: _rid(rnd.getrandbits(31))  # noqa: E731
    [root] = ledger.assert_many(
        [
            {
                "subject": "s",
                "predicate": "root",
                "value": 0,
                "space": "o",
                "actor": "a",
                "receipt_id": _rid(0),
                "fact_id": fid(),
            }
        ]
    )
    prev, current, summaries = root.fact_id, {"a": [], "b": []}, []
    for i in range(1, links + 1):
        rid = _rid(i)
        summaries.append(ReceiptSummary(rid, f"t{i:04d}", "w", "executed", [prev]))
        key = rnd.choice(["a", "b"])
        req: dict[str, Any] = {
            "subject": "s",
            "predicate": key,
            "value": i,
            "space": "o",
            "actor": "a",
            "receipt_id": rid,
            "fact_id": fid(),
        }
        if current[key]:
            req["supersedes"] = current[key][-1]
        [e] = ledger.assert_many([req])
        current[key].append(e.fact_id)
        prev = e.fact_id
        if rnd.random() < 0.15:
            ledger.retract(fact_id=current[key].pop(), actor="x", reason="earlier")
        elif rnd.random() < 0.1:
            ledger.forget(fact_id=current[key].pop(), actor="x", reason="earlier")
    return root.fact_id, summaries


async def _old_apply(custody: Any, blast: Any) -> list[tuple[str, bool, bool]]:
    """``retract.apply`` as it was: an as-of of the whole ledger after every round."""
    from agent_custody_state.ledger.errors import LedgerError

    derived = {f.fact_id: f for f in blast.derived_facts}
    queue, tried, out = [(f, False) for f in blast.still_believed], set(), []
    while queue:
        for fact, uncovered in queue:
            tried.add(fact.fact_id)
            try:
                await custody.retract(fact_id=fact.fact_id, actor="op", reason="r")
                out.append((fact.fact_id, uncovered, True))
            except LedgerError:
                out.append((fact.fact_id, uncovered, False))
        believed = await custody.run(believed_ids, custody.ledger)
        queue = [(derived[i], True) for i in derived if i in believed and i not in tried]
    return out


def _retracted_plan(seed: int, links: int, old: bool) -> tuple[list[Any], int]:
    import anyio

    from agent_custody_state.extras import retract
    from agent_custody_state.stores.flows import Custody

    with Ledger("memory:") as ledger:
        root, summaries = _chain_site(ledger, seed, links)
        blast = blast_radius(ledger, summaries, root)
        custody = Custody(ledger, [])
        passes = [0]
        real = retract.believed_ids

        def counted(book: Ledger) -> set[str]:
            passes[0] += 1
            return real(book)

        if old:
            return anyio.run(lambda: _old_apply(custody, blast)), 0
        retract.believed_ids = counted  # type: ignore[assignment]
        try:
            report = anyio.run(
                lambda: retract.apply(custody, blast, actor="op", reason="r", receipt_id=None)
            )
        finally:
            retract.believed_ids = real  # type: ignore[assignment]
        items = [(r.fact.fact_id, r.uncovered, r.done is not None) for r in report.items]
        return items, passes[0]


def test_retract_apply_looks_at_every_belief_a_bounded_number_of_times() -> None:
    """A value forty calls updated in turn, each shown the one before: retracting what derived
    from the first uncovers one replacement per round. Before, each of the rounds made an as-of
    of the whole ledger (about forty); now only the last round, which uncovers nothing, does."""
    items, passes = _retracted_plan(seed=1, links=40, old=False)
    assert len(items) > 20 and passes <= 2, (len(items), passes)


@pytest.mark.parametrize("seed", range(8))
def test_retract_apply_retracts_what_the_rounds_over_everything_did(seed: int) -> None:
    """Chains of replacements with links retracted or forgotten beforehand: the same facts
    retracted, in the same order, each marked uncovered or not as before."""
    new, _ = _retracted_plan(seed, 30, old=False)
    old, _ = _retracted_plan(seed, 30, old=True)
    assert new == old

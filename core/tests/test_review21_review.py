"""``review --out`` without repeated work (twenty-first review): each receipt is verified once
per run and its file read three times (listed, summarised, packed), not four; what a page and
its ``.json`` show is unchanged, and a forget committed during the run is still hidden.

Shown by counting calls, never by timing (timings on a loaded machine move too much to test).
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent / "extras"))
from gatewaysim import Gateway, seeded, text_result, write_keys

from agent_custody_state.extras import bundles, review
from agent_custody_state.extras.review import (
    ReviewOptions,
    ReviewRun,
    list_receipts,
    receipt_page,
    served_bundle,
)
from agent_custody_state.extras.review_server import write_review
from agent_custody_state.extras.verify import VerifyOptions
from agent_custody_state.keys import load_public_ref
from agent_custody_state.ledger.ledger import Ledger


def _rid(i: int) -> str:
    return f"{i:08x}-0000-4000-8000-{i:012x}"


def _site(root: Path, calls: int) -> tuple[Path, Path, list[str], VerifyOptions]:
    """``calls`` write receipts, each shown what the one before wrote, a JSONL ledger of their
    facts (one per call), and the keys that verify them."""
    receipts = root / "receipts"
    receipts.mkdir()
    gateway, principal = seeded(1), seeded(2)
    gw = Gateway(receipts, gateway, principal)
    ids: list[str] = []
    path = root / "ledger.jsonl"
    with Ledger(path) as ledger:
        for i in range(calls):
            rid = _rid(i + 1)
            event = ledger.assert_fact(
                subject=f"acct:{i}",
                predicate="email",
                value=f"SECRET-{i}",
                space="org",
                actor="agent",
                receipt_id=rid,
            )
            gw.seen = ids[-1:]
            args = {"subject": f"acct:{i}", "predicate": "email", "value": f"SECRET-{i}"}
            written = text_result({"written": [event.fact.to_dict()]})
            gw.call(rid, f"2026-09-01T10:00:{i:02d}.000Z", "memory.write", args, written)
            ids.append(event.fact_id)
    _, gateway_pub = write_keys(gateway, root, "gateway")
    _, principal_pub = write_keys(principal, root, "principal")
    keys = VerifyOptions([load_public_ref(str(gateway_pub))], [load_public_ref(str(principal_pub))])
    return receipts, path, ids, keys


def _statement(bundle: Any) -> str:
    return base64.b64decode(bundle["envelope"]["payload"]).decode()


class _Counts:
    """Verifications run, receipt files read, and the ledger's event count asked (how a run
    checks that its snapshot, and the erasures worked out from it, still hold)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, ledger: Ledger) -> None:
        self.verified = 0
        self.files = 0
        self.checks = 0
        verify, read, count = review.verify_bundle, bundles.read_bytes, ledger.backend.count

        def verify_bundle(bundle: Any, keys: VerifyOptions) -> Any:
            self.verified += 1
            return verify(bundle, keys)

        def read_bytes(path: Path) -> bytes:
            self.files += 1
            return read(path)

        def counted() -> int:
            self.checks += 1
            return count()

        monkeypatch.setattr(review, "verify_bundle", verify_bundle)
        monkeypatch.setattr(ledger.backend, "count", counted)
        monkeypatch.setattr(bundles, "read_bytes", read_bytes)


@pytest.mark.parametrize("calls", [3, 8])
def test_review_out_verifies_each_receipt_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, calls: int
) -> None:
    """The listing verifies every receipt; its page reuses that result, since the bundle its
    pack read is the one listed; the ledger is checked unchanged four times a receipt (the
    pack's two, before its erasures, before its ``.json``). Before: verified twice per receipt,
    its file read four times, the ledger checked six times."""
    receipts, path, _, keys = _site(tmp_path, calls)
    with Ledger(path, read_only=True) as ledger:
        counts = _Counts(monkeypatch, ledger)
        written = write_review(ReviewOptions(str(receipts), ledger, keys), tmp_path / "pages")
    assert written == {"receipts": calls}
    assert counts.verified == calls, (calls, counts.verified)
    assert counts.files == 3 * calls, (calls, counts.files)
    assert counts.checks == 4 * calls, (calls, counts.checks)
    for i in range(calls):
        html = (tmp_path / "pages" / "r" / f"{_rid(i + 1)}.html").read_text()
        assert "RESULT: VERIFIED" in html and "NOT VERIFIED" not in html


def test_the_pages_are_those_built_one_at_a_time(tmp_path: Path) -> None:
    """What a run writes, page and ``.json``, is what the server builds for one page alone
    (its own run, nothing kept from a listing), a forgotten value hidden in both."""
    receipts, path, ids, keys = _site(tmp_path, 4)
    with Ledger(path) as ledger:
        ledger.forget(fact_id=ids[1], actor="user:admin", reason="erasure request")
        o = ReviewOptions(str(receipts), ledger, keys)
        write_review(o, tmp_path / "pages")
        for i in range(4):
            rid = _rid(i + 1)
            alone = receipt_page(o, rid, "../index.html", f"{rid}.json")
            assert (tmp_path / "pages" / "r" / f"{rid}.html").read_text() == alone
            page_json = json.loads((tmp_path / "pages" / "r" / f"{rid}.json").read_text())
            assert page_json == served_bundle(o, rid)
    assert "SECRET-1" not in _statement(
        json.loads((tmp_path / "pages/r" / f"{_rid(2)}.json").read_text())
    )


def test_a_forget_between_a_page_and_its_json_is_hidden_from_the_json(tmp_path: Path) -> None:
    """The ``.json`` reuses the page's redacted bundle only while the ledger's erasures are the
    ones the page hid: a forget committed (here by another ledger object, as by another
    process) after the page is written is hidden from its ``.json``, and from the next page."""
    receipts, path, ids, keys = _site(tmp_path, 3)
    with Ledger(path) as ledger:
        o = ReviewOptions(str(receipts), ledger, keys)
        run = ReviewRun(o)
        list_receipts(o, run)
        page = receipt_page(o, _rid(2), "/", "raw", run)
        assert "SECRET-1" in page
        with Ledger(path) as other:
            other.forget(fact_id=ids[1], actor="user:admin", reason="erasure request")
        assert "SECRET-1" not in _statement(served_bundle(o, _rid(2), run))
        after = receipt_page(o, _rid(2), "/", "raw", run)
        assert "SECRET-1" not in after and "(erased)" in after
        assert "SECRET-1" not in _statement(served_bundle(o, _rid(2), run))


def test_a_receipt_changed_after_the_listing_is_verified_again(tmp_path: Path) -> None:
    """The listing's verdict is reused only for the bundle it verified: a receipt file
    replaced between the listing and its page (a signature broken) is verified anew, and its
    ``.json`` is the file read again, not what the page showed."""
    receipts, path, _, keys = _site(tmp_path, 2)
    target = receipts / f"{_rid(2)}.json"
    with Ledger(path, read_only=True) as ledger:
        o = ReviewOptions(str(receipts), ledger, keys)
        run = ReviewRun(o)
        [row] = [r for r in list_receipts(o, run) if r.receipt_id == _rid(2)]
        assert row.verified is True
        bundle = json.loads(target.read_text())
        signature = bundle["envelope"]["signatures"][0]["sig"]
        bundle["envelope"]["signatures"][0]["sig"] = ("A" if signature[0] != "A" else "B") + (
            signature[1:]
        )
        target.write_text(json.dumps(bundle))
        page = receipt_page(o, _rid(2), "/", "raw", run)
        assert "RESULT: NOT VERIFIED" in page
        assert served_bundle(o, _rid(2), run)["envelope"]["signatures"][0]["sig"] != signature

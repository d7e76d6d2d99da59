"""``review`` serves only what its index lists: a receipt's page and its bundle re-serialised,
for a regular file of bounded size that is a receipt bundle stored under its own id. Whatever
else sits at ``<receipts>/<id>.json`` (not a bundle, damaged, a symbolic link out of the
directory to a private key or to a real receipt, a FIFO, a huge file) is a 404 on both routes
and absent from the index and the static pages."""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import worked
from worked import R1, R2, R3

from agent_custody_state.extras import bundles
from agent_custody_state.extras.bundles import load_bundle
from agent_custody_state.extras.jsview import pretty
from agent_custody_state.extras.review import ReviewOptions, list_receipts
from agent_custody_state.extras.review_server import ReviewServer, write_review

SECRET = (
    "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n"
)
RID = "44444444-4444-4444-8444-444444444444"  # what the planted file is named


@pytest.fixture
def served(fixture18: worked.Worked) -> Iterator[str]:
    server = ReviewServer(ReviewOptions(str(fixture18.receipts)), "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.url
    finally:
        server.shutdown()
        server.server_close()


def _secret_key(w: worked.Worked, at: Path) -> None:
    (w.root / "id_ed25519").write_text(SECRET)
    at.symlink_to(w.root / "id_ed25519")


def _receipt_outside(w: worked.Worked, at: Path) -> None:
    """A real receipt bundle, kept outside the receipts directory, linked in under its own id."""
    (w.root / "elsewhere").mkdir()
    shutil.move(w.receipts / f"{R2}.json", w.root / "elsewhere" / f"{R2}.json")
    (w.receipts / f"{R2}.json").symlink_to(w.root / "elsewhere" / f"{R2}.json")
    at.symlink_to(w.receipts / f"{R1}.json")  # and one inside: links are not followed at all


PLANTED: dict[str, Callable[[worked.Worked, Path], None]] = {
    "json that is no bundle": lambda w, at: at.write_text('{"secret": "' + SECRET[:27] + '"}'),
    "not json": lambda w, at: at.write_text(SECRET),
    "nested 100,000 levels": lambda w, at: at.write_text("[" * 100_000 + "]" * 100_000),
    "another receipt's bundle": lambda w, at: at.write_text(
        (w.receipts / f"{R1}.json").read_text()
    ),
    "a link to a private key": _secret_key,
    "links to receipts": _receipt_outside,
    "a fifo": lambda w, at: os.mkfifo(at),
    "a folder": lambda w, at: at.mkdir(),
}


@pytest.mark.parametrize("planted", list(PLANTED))
def test_what_the_index_does_not_list_is_not_served(
    fixture18: worked.Worked, served: str, planted: str
) -> None:
    w = fixture18
    PLANTED[planted](w, w.receipts / f"{RID}.json")
    listed = {r.receipt_id for r in list_receipts(ReviewOptions(str(w.receipts)))}
    linked = planted == "links to receipts"
    assert listed == ({R1, R3} if linked else {R1, R2, R3})
    index = httpx.get(served).text
    assert f"{len(listed)} receipt(s)" in index and RID not in index
    for rid in (RID, R2) if linked else (RID,):
        for path in (f"r/{rid}", f"r/{rid}.json"):
            response = httpx.get(served + path, timeout=10)
            assert (response.status_code, response.headers["content-type"]) == (404, "text/plain")
            assert response.text.startswith("not found: ") and "PRIVATE" not in response.text
            assert response.headers["x-frame-options"] == "DENY"


def test_a_huge_file_is_not_read(
    fixture18: worked.Worked, served: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bound is the loaders' own (``MAX_BUNDLE_BYTES``): a receipt over it is not listed."""
    sizes = {r: len((fixture18.receipts / f"{r}.json").read_bytes()) for r in (R1, R2, R3)}
    rid = max(sizes, key=sizes.__getitem__)
    limit = sizes[rid] - 1
    assert sorted(sizes.values())[1] <= limit  # only the largest is over it
    monkeypatch.setattr(bundles, "MAX_BUNDLE_BYTES", limit)
    response = httpx.get(f"{served}r/{rid}.json")
    assert response.status_code == 404
    assert response.text == f"not found: {rid}.json is not a receipt (larger than {limit} bytes)"
    assert "2 receipt(s)" in httpx.get(served).text
    monkeypatch.setattr(bundles, "MAX_BUNDLE_BYTES", limit + 1)
    assert httpx.get(f"{served}r/{rid}.json").status_code == 200


def test_the_bundle_is_served_re_serialised_as_the_static_pages_write_it(
    fixture18: worked.Worked, served: str, tmp_path: Path
) -> None:
    """Served as parsed and printed again, never as the bytes on disk: here a compact file with
    a duplicate key, which a reader of the raw bytes would take for one thing and JSON.parse
    for another."""
    path = fixture18.receipts / f"{R3}.json"
    bundle = json.loads(path.read_text())
    text = json.dumps(bundle, separators=(",", ":"))
    path.write_text('{"envelope":"forged",' + text[1:])
    raw = httpx.get(f"{served}r/{R3}.json")
    assert raw.status_code == 200 and raw.headers["content-type"] == "application/json"
    assert raw.text == pretty(load_bundle(fixture18.receipts, R3)) == pretty(bundle)
    site = tmp_path / "site"
    site.mkdir()
    assert write_review(ReviewOptions(str(fixture18.receipts)), site) == {"receipts": 3}
    assert (site / "r" / f"{R3}.json").read_text(encoding="utf-8") == raw.text


def test_the_static_pages_leave_out_links(fixture18: worked.Worked, tmp_path: Path) -> None:
    w = fixture18
    _secret_key(w, w.receipts / f"{RID}.json")
    _receipt_outside(w, w.receipts / "another.json")
    site = tmp_path / "site"
    site.mkdir()
    assert write_review(ReviewOptions(str(w.receipts)), site) == {"receipts": 2}
    assert sorted(p.name for p in (site / "r").iterdir()) == sorted(
        f"{r}.{ext}" for r in (R1, R3) for ext in ("html", "json")
    )

"""``review`` over plain HTTP (SPEC-EXTRAS 8, review): rows, index, pages, raw bundles, 404s, the
strict headers on every response, loopback only, and the static pages."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import scenarios
from conftest import Cli

from agent_custody_state.extras.bundles import load_bundle
from agent_custody_state.extras.jsview import pretty
from agent_custody_state.extras.review import ReviewOptions, list_receipts
from agent_custody_state.extras.review_server import HEADERS, ReviewServer, write_review
from agent_custody_state.extras.verify import VerifyOptions
from agent_custody_state.keys import load_public_ref
from agent_custody_state.ledger.ledger import Ledger

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> scenarios.Built:
    return scenarios.review_scenario(tmp_path_factory.mktemp("review"))


def options(b: scenarios.Built, ledger: Ledger | None, *, keys: bool = True) -> ReviewOptions:
    verify = VerifyOptions(
        [load_public_ref(b.keys["gateway.pub"])], [load_public_ref(b.keys["principal.pub"])]
    )
    return ReviewOptions(str(b.receipts), ledger, verify if keys else None, "Support desk")


def serving(o: ReviewOptions) -> Iterator[str]:
    server = ReviewServer(o, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.url
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def url(built: scenarios.Built) -> Iterator[str]:
    with Ledger(built.ledger) as ledger:
        yield from serving(options(built, ledger))


def test_rows(built: scenarios.Built) -> None:
    rows = list_receipts(options(built, None))
    assert len(rows) == 3 and all(r.verified for r in rows)
    assert sorted(r.status for r in rows) == ["denied", "executed", "executed"]
    assert [r.receipt_id for r in rows] == [
        built.ids["denied"],
        built.ids["read"],
        built.ids["write"],
    ]
    assert [r.timestamp for r in rows] == sorted((r.timestamp for r in rows), reverse=True)


def test_index_page_and_raw_bundle(built: scenarios.Built, url: str) -> None:
    index = httpx.get(url)
    assert index.status_code == 200 and index.headers["content-type"] == "text/html; charset=utf-8"
    assert "<h1>Support desk</h1>" in index.text and "3 receipt(s)" in index.text
    assert f'href="/r/{built.ids["write"]}"' in index.text
    assert index.text.count(">verified<") == 3
    assert f'<meta http-equiv="content-security-policy" content="{CSP}">' in index.text.replace(
        "&#x27;", "'"
    )
    page = httpx.get(f"{url}r/{built.ids['write']}")
    assert (
        page.status_code == 200 and "default-src 'none'" in page.headers["content-security-policy"]
    )
    for needle in (
        "<dt>WHO</dt>",
        "support-agent (attested, named in a signed grant)",
        "<dt>DID ANYTHING DEPEND ON THIS</dt>",
        "RESULT: VERIFIED",
        f'href="/r/{built.ids["write"]}.json"',
        '<a href="/">All receipts</a>',
    ):
        assert needle in page.text, needle
    assert "<script" not in page.text and "http" not in page.text.split("<main>")[1].replace(
        url, ""
    )
    raw = httpx.get(f"{url}r/{built.ids['write']}.json")
    assert raw.headers["content-type"] == "application/json"
    assert raw.text == pretty(load_bundle(built.receipts, built.ids["write"]))  # as write_review
    assert {"envelope", "inclusion"} <= set(raw.json())


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("r/not-a-receipt-id", 404),
        ("r/00000000-0000-4000-8000-000000000000", 404),
        ("r/00000000-0000-4000-8000-000000000000.json", 404),
        ("r/../ledger.jsonl", 404),
        ("notes.json", 404),
        ("r/" + "a" * 36 + ".html", 404),
    ],
)
def test_not_found(url: str, path: str, status: int) -> None:
    response = httpx.get(url + path)
    assert response.status_code == status and response.headers["content-type"] == "text/plain"


def test_every_response_has_the_strict_headers(built: scenarios.Built, url: str) -> None:
    responses = [
        httpx.get(url),
        httpx.get(f"{url}r/{built.ids['read']}"),
        httpx.get(f"{url}r/{built.ids['read']}.json"),
        httpx.get(f"{url}nowhere"),
        httpx.post(url, content=b"x"),
        httpx.get(url, headers={"host": "evil.example"}),
        httpx.head(url),
    ]
    assert [r.status_code for r in responses] == [200, 200, 200, 404, 405, 421, 200]
    for response in responses:
        assert response.headers["cache-control"] == "no-store"
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["content-security-policy"] == CSP
        for name, value in HEADERS.items():
            assert response.headers[name] == value
    assert responses[-1].content == b""


def test_a_damaged_receipt_is_a_404_as_it_is_not_listed(
    built: scenarios.Built, tmp_path: Path
) -> None:
    import shutil

    receipts = tmp_path / "receipts"
    shutil.copytree(built.receipts, receipts)
    rid = "0" * 8 + "-0000-4000-8000-" + "0" * 12
    (receipts / f"{rid}.json").write_text("{not json")
    o = ReviewOptions(str(receipts))
    for url in serving(o):
        for path in (f"r/{rid}", f"r/{rid}.json"):
            response = httpx.get(url + path)
            assert response.status_code == 404 and response.headers["x-frame-options"] == "DENY"
            assert response.text.startswith(f"not found: {rid}.json is not a receipt (not JSON")
        assert "3 receipt(s)" in httpx.get(url).text  # the damaged file is no receipt in the index


def test_without_keys_or_ledger(built: scenarios.Built) -> None:
    for url in serving(options(built, None, keys=False)):
        index = httpx.get(url).text
        assert "not checked" in index and "no ledger" in index and ">verified<" not in index
        page = httpx.get(f"{url}r/{built.ids['write']}").text
        assert "Not checked: start the review with --issuer-key and --principal-key" in page
        assert "unknown without a ledger" in page


def test_binds_loopback_only(built: scenarios.Built) -> None:
    for host in ("0.0.0.0", "192.0.2.1", "example.com", "::"):
        with pytest.raises(ValueError, match="not a loopback address"):
            ReviewServer(ReviewOptions(str(built.receipts)), host, 0)
    server = ReviewServer(ReviewOptions(str(built.receipts)), "127.0.0.1", 0)
    try:
        assert server.server_address[0] == "127.0.0.1" and server.url.startswith(
            "http://127.0.0.1:"
        )
    finally:
        server.server_close()


def test_static_pages(built: scenarios.Built, tmp_path: Path, cli: Cli) -> None:
    out = tmp_path / "site"
    out.mkdir()
    with Ledger(built.ledger) as ledger:
        assert write_review(options(built, ledger), out) == {"receipts": 3}
    pages = sorted(p.name for p in (out / "r").glob("*.html"))
    assert pages == sorted(f"{i}.html" for i in built.ids.values())
    index = (out / "index.html").read_text()
    assert f'href="r/{built.ids["write"]}.html"' in index
    page = (out / "r" / f"{built.ids['write']}.html").read_text()
    assert "<dt>WHAT IT DID</dt>" in page and '<a href="../index.html">' in page
    assert f'href="{built.ids["write"]}.json"' in page
    second = tmp_path / "again"
    run = cli(
        "review",
        "--receipts",
        built.receipts,
        "--out",
        second,
        *built.flags("gateway.pub", "principal.pub"),
    )
    assert run.code == 0 and run.out == f"wrote 3 receipt page(s) and the index to {second}\n"
    assert sorted(p.name for p in second.iterdir()) == ["index.html", "r"]


def test_the_command_serves_until_interrupted(built: scenarios.Built) -> None:
    command = [
        sys.executable,
        "-m",
        "agent_custody_state",
        "review",
        "--receipts",
        str(built.receipts),
        "--ledger",
        str(built.ledger),
        "--port",
        "0",
        *built.flags("gateway.pub", "principal.pub"),
    ]
    process = subprocess.Popen(
        command, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        found = re.match(
            r"agent-custody-memory review: (http://127\.0\.0\.1:\d+/) receipts=(\S+) ledger=\S+ verifying$",
            line,
        )
        assert found, line
        index = httpx.get(found.group(1), timeout=10)
        assert index.status_code == 200 and index.text.count(">verified<") == 3
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_the_command_refuses_a_public_address(built: scenarios.Built, cli: Cli) -> None:
    run = cli("review", "--receipts", built.receipts, "--host", "0.0.0.0")
    assert run.code == 1 and run.err.startswith("error: --host 0.0.0.0 is not a loopback address")
    assert len(run.err.splitlines()) == 1

"""The review pages as a person sees them, in headless Chromium: the index, a receipt's page,
the links between them, the raw bundle, the static copy; the content security policy enforced
by the browser itself; nothing requested from anywhere but the review."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import worked

from agent_custody_state.extras.review import ReviewOptions
from agent_custody_state.extras.review_server import write_review
from agent_custody_state.extras.verify import VerifyOptions
from agent_custody_state.keys import load_public_ref
from agent_custody_state.ledger.ledger import Ledger

LABELS = [
    "WHO",
    "WHO AUTHORIZED IT",
    "WHAT WAS ALLOWED",
    "WHAT THE AGENT SAW",
    "WHAT IT DID",
    "WHY",
    "WHAT EVIDENCE",
    "CAN I VERIFY IT",
    "DID ANYTHING DEPEND ON THIS",
    "WHAT NEEDS REVERSAL",
]
# Runs in the page: a script the CSP must block, and the violation the browser reports for it.
INJECT = """() => new Promise((resolve) => {
  document.addEventListener('securitypolicyviolation', (e) => resolve(e.effectiveDirective));
  const s = document.createElement('script');
  s.textContent = 'window.__ran = true';
  document.body.appendChild(s);
  setTimeout(() => resolve('no violation'), 3000);
})"""


@pytest.fixture
def case(tmp_path: Path) -> Any:
    return worked.build(tmp_path)


def options(case: Any, ledger: Ledger) -> ReviewOptions:
    keys = VerifyOptions([load_public_ref(case.gateway_pub)], [load_public_ref(case.principal_pub)])
    return ReviewOptions(str(case.receipts), ledger, keys, "Support desk")


def watch(page: Any) -> dict[str, list[str]]:
    seen: dict[str, list[str]] = {"requests": [], "errors": []}
    page.on("request", lambda r: seen["requests"].append(r.url))
    page.on("pageerror", lambda e: seen["errors"].append(str(e)))
    page.on("console", lambda m: m.type == "error" and seen["errors"].append(m.text))
    return seen


def shot(page: Any, name: str) -> None:
    folder = os.environ.get("ACS_SCREENSHOTS")
    if folder:
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def test_served_pages(browser: Any, serve: Any, case: Any) -> None:
    with Ledger(case.ledger) as ledger:
        url = serve(options(case, ledger))
        page = browser.new_page()
        seen = watch(page)
        response = page.goto(url)
        assert response.status == 200 and page.title() == "Support desk"
        assert page.locator("h1").inner_text() == "Support desk"
        assert page.locator("tbody tr").count() == 3
        assert page.locator("span.ok").all_inner_texts() == ["verified"] * 3
        shot(page, "index")
        page.click(f"a[href='/r/{worked.R1}']")
        assert page.url == f"{url}r/{worked.R1}"
        assert page.locator("dt").all_inner_texts() == LABELS
        answers = dict(zip(LABELS, page.locator("dd").all_inner_texts(), strict=True))
        assert answers["CAN I VERIFY IT"].strip() == "VERIFIED, 16 checks"
        assert "2 belief(s) still believed" in answers["WHAT NEEDS REVERSAL"]
        assert "acct:42 discount = 20 [f2f2f2f2] (space org)" in answers["WHAT NEEDS REVERSAL"]
        assert page.locator("pre").inner_text().endswith("RESULT: VERIFIED")
        shot(page, "receipt")
        # The policy is enforced by the browser: an injected script does not run.
        assert page.evaluate(INJECT) in ("script-src-elem", "script-src")
        assert page.evaluate("window.__ran === undefined")
        page.click("text=The bundle as issued")
        assert page.url == f"{url}r/{worked.R1}.json"
        assert '"envelope"' in page.content()
        page.go_back()
        page.click("text=All receipts")
        assert page.url == url
        origin = url.rstrip("/")
        assert seen["requests"] and all(r.startswith(origin) for r in seen["requests"])
        assert [e for e in seen["errors"] if "Content Security Policy" not in e] == []
        page.close()


def test_a_page_is_refused_inside_a_frame(browser: Any, serve: Any, case: Any) -> None:
    """x-frame-options DENY: another page cannot frame the review (clickjacking)."""
    with Ledger(case.ledger) as ledger:
        url = serve(options(case, ledger))
        page = browser.new_page()
        page.set_content(f'<iframe id="f" src="{url}"></iframe>')
        page.wait_for_timeout(1000)
        frame = page.frame_locator("#f")
        # The browser shows its own error page in the frame, never the review.
        assert "Support desk" not in frame.locator("body").inner_text()
        assert frame.locator("table").count() == 0
        page.close()


def test_static_pages(browser: Any, case: Any, tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    with Ledger(case.ledger) as ledger:
        assert write_review(options(case, ledger), site) == {"receipts": 3}
    page = browser.new_page()
    seen = watch(page)
    page.goto((site / "index.html").as_uri())
    assert page.locator("tbody tr").count() == 3
    page.click(f"a[href='r/{worked.R3}.html']")
    assert page.locator("dt").all_inner_texts() == LABELS
    assert page.evaluate(INJECT) in ("script-src-elem", "script-src")
    page.click("text=All receipts")
    assert page.url == (site / "index.html").as_uri()
    assert all(r.startswith("file://") for r in seen["requests"])
    page.close()

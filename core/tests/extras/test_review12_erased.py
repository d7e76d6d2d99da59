"""The operator's extras never show an erased value (twelfth review).

The gateway's signed receipts hold each call's arguments and result, so after a forget the
value is still in the receipt that wrote it, in the precommitted authorization embedded in it,
and in every read that returned it. ``explain`` and the review pages (and ``/r/<id>.json``,
served and written) show it as erased, say that the gateway's file still holds it, and say that
a verdict was reached on the receipt as stored; ``pack`` keeps carrying the receipt as issued.
``review --out`` leaves exactly this run's pages: an earlier run's page of a receipt pruned
since is removed, and nothing it did not write.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli
from gatewaysim import Gateway, seeded, text_result, write_keys
from worked import E1, F1, wire_fact, write_result

from agent_custody_state.extras.erased import CHECKED_AS_STORED, STILL_HELD
from agent_custody_state.extras.jsview import pretty
from agent_custody_state.extras.review import ReviewOptions
from agent_custody_state.extras.review_server import ReviewServer, write_review
from agent_custody_state.extras.reviewfiles import MARK
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.model import AssertEvent, Fact

SECRET = "SECRET-PLAN-51c0"
RW = "aaaaaaaa-0000-4000-8000-00000000000a"  # writes F1, precommitted
RR = "bbbbbbbb-0000-4000-8000-00000000000b"  # reads it back
OTHER = "cccccccc-0000-4000-8000-00000000000c"  # unrelated: never touched


class Site:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.receipts = root / "receipts"
        self.receipts.mkdir()
        keys = root / "keys"
        keys.mkdir()
        gateway, principal = seeded(1), seeded(2)
        _, self.gateway_pub = write_keys(gateway, keys, "gateway")
        _, self.principal_pub = write_keys(principal, keys, "principal")
        self.pack_key, self.pack_pub = write_keys(seeded(3), keys, "pack")
        fact = wire_fact(F1, "plan", SECRET, RW, "2026-09-01T10:00:00.010Z")
        gw = Gateway(self.receipts, gateway, principal)
        args = {"subject": "acct:42", "predicate": "plan", "value": SECRET, "space": "org"}
        gw.call(RW, "2026-09-01T10:00:00.000Z", "memory.write", args, write_result(fact, E1),
                precommit=True)  # fmt: skip
        gw.call(RR, "2026-09-01T10:01:00.000Z", "memory.read", {"subject": "acct:42"},
                text_result({"facts": [fact]}, {"agent-custody/facts": [F1]}))  # fmt: skip
        gw.call(OTHER, "2026-09-01T10:02:00.000Z", "memory.read", {"subject": "acct:7"},
                text_result({"facts": []}))  # fmt: skip
        self.ledger = root / "ledger.jsonl"
        with Ledger(self.ledger) as opened:
            opened.import_events([AssertEvent(E1, fact["validFrom"], Fact.from_dict(fact))])
        self.keys = ["--issuer-key", self.gateway_pub, "--principal-key", self.principal_pub]

    def forget(self) -> None:
        with Ledger(self.ledger) as opened:
            opened.forget(fact_id=F1, actor="user:admin", reason="erasure request")


@pytest.fixture
def site(tmp_path: Path) -> Site:
    return Site(tmp_path)


def _decoded(text: str) -> str:
    """A JSON text with every ``payload`` (nested envelopes too) decoded beside it."""
    out = [text]

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "payload" and isinstance(v, str):
                    inner = base64.b64decode(v).decode()
                    out.append(inner)
                    walk(json.loads(inner))
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(json.loads(text))
    return "\n".join(out)


def test_explain_shows_a_forgotten_value_as_erased(site: Site, cli: Cli) -> None:
    base = ["explain", "--receipts", site.receipts, "--ledger", site.ledger, *site.keys]
    before = cli(*base, "--receipt", RW)
    assert before.code == 0 and SECRET in before.out and STILL_HELD not in before.out
    site.forget()
    for receipt in (RW, RR):
        run = cli(*base, "--receipt", receipt)
        assert run.code == 0, run.err
        assert SECRET not in run.out
        lines = [line[29:] for line in run.out.splitlines()]
        assert STILL_HELD in lines and CHECKED_AS_STORED in lines
        assert any(line.startswith("VERIFIED, ") for line in lines)  # on the receipt as stored
    wrote = cli(*base, "--receipt", RW).out
    assert '"value":(erased)} -> executed' in wrote
    untouched = cli(*base, "--receipt", OTHER).out
    assert STILL_HELD not in untouched and CHECKED_AS_STORED not in untouched


def test_the_review_pages_and_raw_json_hide_a_forgotten_value(site: Site, cli: Cli) -> None:
    site.forget()
    with Ledger(site.ledger) as ledger:
        server = ReviewServer(ReviewOptions(str(site.receipts), ledger), "127.0.0.1", 0)
        try:
            answers = {
                rid: (server.respond(f"/r/{rid}")[2], server.respond(f"/r/{rid}.json")[2])
                for rid in (RW, RR, OTHER)
            }
        finally:
            server.server_close()
    for rid in (RW, RR):
        html, raw = map(str, answers[rid])
        assert SECRET not in html and SECRET not in _decoded(raw)
        assert "(erased)" in html and "The bundle with its erased values hidden" in html
        assert "prune" in html
        statement = json.loads(base64.b64decode(json.loads(raw)["envelope"]["payload"]))
        assert "erased" in json.loads(raw)
        marker = {"erased": True, "factId": F1}
        assert any(
            isinstance(v, dict) and marker.items() <= v.items() and v["digestKind"] == "sha256"
            for v in _values(statement)
        )
    # A receipt with nothing erased is served exactly as before: the bundle as stored.
    html, raw = map(str, answers[OTHER])
    assert raw == pretty(json.loads((site.receipts / f"{OTHER}.json").read_text()))
    assert "The bundle as issued" in html
    out = site.root / "site"
    assert (
        cli("review", "--receipts", site.receipts, "--ledger", site.ledger, "--out", out).code == 0
    )
    for rid in (RW, RR):
        assert SECRET not in (out / "r" / f"{rid}.html").read_text()
        assert SECRET not in _decoded((out / "r" / f"{rid}.json").read_text())


def _values(node: Any) -> list[Any]:
    """Every ``value`` member anywhere, JSON in strings and payloads included."""
    found: list[Any] = []
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "value":
                found.append(v)
            if k == "payload" and isinstance(v, str):
                found += _values(json.loads(base64.b64decode(v)))
            else:
                found += _values(v)
    elif isinstance(node, list):
        for v in node:
            found += _values(v)
    elif isinstance(node, str) and node[:1] in "{[" and node:
        found += _values(json.loads(node))
    return found


def test_pack_still_carries_the_receipt_as_the_gateway_signed_it(site: Site, cli: Cli) -> None:
    site.forget()
    out = site.root / "p.json"
    base = ["--ledger", site.ledger, "--receipts", site.receipts, "--fact", F1]
    assert cli("pack", *base, "--out", out, "--sign", site.pack_key).code in (0, 1)
    pack = json.loads(base64.b64decode(json.loads(out.read_text())["payload"]))["predicate"]
    stored = json.loads((site.receipts / f"{RW}.json").read_text())
    assert pack["receipts"][RW] == stored  # unredacted: its signature still verifies
    check = cli("pack", "--verify", out, "--key", site.pack_pub, *site.keys)
    assert f"PASS  receipt {RW[:8]} verifies" in check.out


def test_review_out_removes_its_own_pages_of_pruned_receipts_only(site: Site, cli: Cli) -> None:
    out = site.root / "site"
    review = ["review", "--receipts", site.receipts, "--ledger", site.ledger, "--out", out]
    assert cli(*review).code == 0
    assert (out / "r" / f"{RR}.html").exists() and MARK in (out / "index.html").read_text()
    theirs = [out / "notes.txt", out / "r" / "dddddddd-0000-4000-8000-00000000000d.html"]
    for path in theirs:
        path.write_text("not the review's")
    (site.receipts / f"{RR}.json").unlink()  # the gateway's prune
    site.forget()
    run = cli(*review)
    assert run.code == 0 and run.out.startswith("wrote 2 receipt page(s)")
    assert not (out / "r" / f"{RR}.html").exists() and not (out / "r" / f"{RR}.json").exists()
    assert all(path.read_text() == "not the review's" for path in theirs)
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert written == sorted(
        ["index.html", "notes.txt", *(str(t.relative_to(out)) for t in theirs[1:]),
         *(f"r/{rid}.{ext}" for rid in (RW, OTHER) for ext in ("html", "json"))]
    )  # fmt: skip
    assert all(SECRET not in (out / name).read_text() for name in written)
    assert f"{RR[:8]}" not in (out / "index.html").read_text()


def test_an_index_the_review_did_not_write_names_nothing_to_remove(
    site: Site, tmp_path: Path
) -> None:
    """Pages are removed only when a marked index (one the review wrote) links to them."""
    out = tmp_path / "site"
    (out / "r").mkdir(parents=True)
    mine = out / "r" / f"{OTHER.replace('c', 'e')}.html"
    mine.write_text("mine")
    link = f'<a href="r/{mine.stem}.html">'
    (out / "index.html").write_text(f"<!doctype html>\n{link}")  # someone else's index
    with Ledger(site.ledger) as ledger:
        options = ReviewOptions(str(site.receipts), ledger)
        write_review(options, out)
        assert mine.read_text() == "mine"
        index = (out / "index.html").read_text()
        assert index.startswith(f"<!doctype html>\n{MARK}\n") and link not in index
        (site.receipts / f"{OTHER}.json").unlink()
        write_review(options, out)  # its own page of OTHER goes; the other file stays
    assert mine.read_text() == "mine"
    assert not (out / "r" / f"{OTHER}.html").exists() and (out / "r" / f"{RW}.html").exists()


def test_a_receipt_nested_absurdly_deep_is_walked_without_a_recursion_error() -> None:
    """A receipt parses at most 300 levels deep, but a text item inside it may nest as deep
    again: the walk stops at a bounded depth instead of exhausting Python's recursion."""
    from agent_custody_state.canonical import js_json
    from agent_custody_state.extras.erased import Erased, Erasures, TextMarker, redact

    def deep(n: int, leaf: Any) -> Any:
        for _ in range(n):
            leaf = [leaf]
        return leaf

    erased = Erased(F1, None, "acct:42", "plan", None, "none")
    found = Erasures(by_fact={F1: erased})
    leaf = {"factId": F1, "value": SECRET}
    inner = js_json(deep(295, {"text": js_json(deep(295, leaf)), **leaf}))
    predicate = deep(290, {"text": inner, **leaf})
    shown, hidden = redact(predicate, found, None, TextMarker())
    assert hidden >= 1 and SECRET in js_json(shown)  # the deepest copy is past the bound


def test_a_verified_writes_lookup_and_a_digest_match_are_hidden_too() -> None:
    """A write with ``evidence: {fact, path}`` copied its value from the gateway's lookup, which
    the receipt holds at ``facts[fact].value`` at that path; a forget that kept a sha256 digest
    also finds the value in another receipt's lookup by its digest (only in a lookup: elsewhere
    a common value would be hidden wherever it appears)."""
    import hashlib

    from agent_custody_state.canonical import canonical_bytes
    from agent_custody_state.extras.erased import Erased, Erasures, TextMarker, redact

    keyed = Erased(F1, RW, "acct:42", "plan", "ab" * 32, "hmac-sha256")
    found = Erasures(by_fact={F1: keyed}, by_receipt={RW: [keyed]})
    args = {"subject": "acct:42", "predicate": "plan", "value": SECRET, "space": "org",
            "evidence": {"fact": "crm", "path": "plans.1.tier"}}  # fmt: skip
    lookup = {"plans": [{"tier": "free"}, {"tier": SECRET, "seats": 5}]}
    p = {"receiptId": RW, "request": {"args": args}, "facts": {"crm": {"value": lookup}}}
    marker = TextMarker()
    shown, hidden = redact(p, found, RW, marker)
    assert hidden == 2 and SECRET not in marker.compact(shown)
    assert marker.compact(shown["facts"]["crm"]["value"]) == (
        '{"plans":[{"tier":"free"},{"tier":(erased),"seats":5}]}'
    )
    assert p["facts"]["crm"]["value"] is lookup and SECRET in str(p)  # the input is unchanged
    digest = hashlib.sha256(canonical_bytes(SECRET)).hexdigest()
    plain = Erased(F1, RW, "acct:42", "plan", digest, "sha256")
    by_digest = Erasures(by_fact={F1: plain}, by_digest={digest: plain})
    other = {
        "receiptId": RR,
        "request": {"args": {"value": SECRET}},  # not a lookup: a digest alone does not say
        "facts": {"x": {"value": SECRET}},
    }
    shown, hidden = redact(other, by_digest, RR, Erased.marker)
    assert hidden == 1 and shown["facts"]["x"]["value"] == plain.marker()
    assert shown["request"]["args"]["value"] == SECRET

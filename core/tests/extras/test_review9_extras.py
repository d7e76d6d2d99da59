"""The operator's extras after a forget, in plain and crypto-shred mode (ninth review).

The worked fixture's receipts (SPEC-EXTRAS 1.8) over a ledger written through the ledger's own
``assert_fact`` (so each value has its commitment salt), with values that no receipt holds: any
of them in an output came from the ledger. After the forget neither the value nor its salt may
show in any extra; a crypto-shred ledger is read with its key store wherever it is kept; a pack
signed before the forget says when it was built; quarantined (``claimed``) facts are marked.
"""

from __future__ import annotations

import base64
import json
import threading
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import worked
from conftest import Cli

from agent_custody_state.cli.common import open_recorded
from agent_custody_state.extras.explain import build_action_pack, format_explain
from agent_custody_state.extras.pack import build_pack
from agent_custody_state.extras.review import ReviewOptions
from agent_custody_state.extras.review_server import ReviewServer
from agent_custody_state.ledger.ledger import Ledger

PLAN, DISCOUNT = "SECRET-PLAN-7d1f", "SECRET-DISCOUNT-93aa"
MODES = ["plain", "crypto-shred"]


def _mode(mode: str, key_store: Path | None = None) -> dict[str, Any]:
    if mode == "plain":
        return {}
    return {"forget_mode": mode, **({"key_store": str(key_store)} if key_store else {})}


def _ledger(
    w: worked.Worked, mode: str, key_store: Path | None = None, provenance: str = "attested"
) -> tuple[Path, list[str]]:
    """F1 (written in R1) and F2 (written in R3, after R3 was shown F1); returns the salts."""
    w.ledger.unlink()
    with Ledger(w.ledger, **_mode(mode, key_store)) as ledger:
        salts = []
        for fact_id, predicate, value, receipt in (
            (worked.F1, "plan", PLAN, worked.R1),
            (worked.F2, "discount", DISCOUNT, worked.R3),
        ):
            event = ledger.assert_fact(
                fact_id=fact_id,
                subject="acct:42",
                predicate=predicate,
                value=value,
                space="org",
                actor="support-agent",
                provenance=provenance if fact_id == worked.F2 else "attested",
                receipt_id=receipt,
            )
            salts.append(event.fact.extra["valueSalt"])
    return w.ledger, salts


def _forget(w: worked.Worked, mode: str, *fact_ids: str) -> None:
    with Ledger(w.ledger, **_mode(mode)) as ledger:
        for fact_id in fact_ids:
            ledger.forget(fact_id=fact_id, actor="user:admin", reason="erasure request")


def _every_output(cli: Cli, w: worked.Worked, *more: str) -> str:
    """What blast, explain, pack and review print and write, for both facts and every receipt."""
    keys = ["--issuer-key", w.gateway_pub, "--principal-key", w.principal_pub]
    base = ["--ledger", w.ledger, "--receipts", w.receipts, *more]
    runs = [
        cli("blast", *base, "--fact", f, *j)
        for f in (worked.F1, worked.F2)
        for j in ((), ("--json",))
    ]
    for receipt in (worked.R1, worked.R2, worked.R3):
        runs += [cli("explain", *base, "--receipt", receipt, *keys, *j) for j in ((), ("--json",))]
    for n, fact in enumerate((worked.F1, worked.F2)):
        out = w.root / f"pack{n}.json"
        runs.append(
            cli("pack", *base, "--fact", fact, "--out", out, "--sign", w.pack_key, "--json")
        )
        runs.append(cli("pack", "--verify", out, "--key", w.pack_pub, *keys))
    site = w.root / "site"
    runs.append(cli("review", *base, *keys, "--out", site))
    # A forgotten fact's pack fails one check when verified: its forget cites no receipt.
    assert all(r.code in (0, 1) and "error" not in r.err for r in runs), [r.err for r in runs]
    written = [*w.root.glob("pack*.json"), *site.rglob("*")]  # what the extras wrote
    files = [_opened(p) for p in sorted(written) if p.is_file()]
    return "\n".join([*(r.out + r.err for r in runs), *files])


def _opened(path: Path) -> str:
    """A file's text, with a signed file's payload decoded (a pack is base64 inside)."""
    data = path.read_bytes().decode("utf-8", "replace")
    try:
        payload = json.loads(data).get("payload")
    except (ValueError, AttributeError):
        return data
    return data + (base64.b64decode(payload).decode() if isinstance(payload, str) else "")


@pytest.mark.parametrize("mode", MODES)
def test_no_extra_shows_a_forgotten_value_or_its_salt(
    fixture18: worked.Worked, cli: Cli, mode: str
) -> None:
    _, salts = _ledger(fixture18, mode)
    before = _every_output(cli, fixture18)
    assert PLAN in before and salts[0] in before  # the probe sees them while they are live
    assert "A256GCM" not in before  # crypto-shred: values, never their envelopes
    _forget(fixture18, mode, worked.F1)
    for stale in fixture18.root.rglob("pack*.json"):
        stale.unlink()  # the packs signed before the forget hold the value: a copy, by design
    after = _every_output(cli, fixture18)
    assert PLAN not in after and salts[0] not in after
    assert DISCOUNT in after and "A256GCM" not in after  # the other fact still reads


@pytest.mark.parametrize("mode", MODES)
def test_blast_shows_a_forgotten_value_as_erased_not_null(
    fixture18: worked.Worked, cli: Cli, mode: str
) -> None:
    _ledger(fixture18, mode)
    _forget(fixture18, mode, worked.F1, worked.F2)
    run = cli(
        "blast", "--ledger", fixture18.ledger, "--receipts", fixture18.receipts, "--fact", worked.F1
    )
    lines = run.out.splitlines()
    assert run.code == 0
    assert lines[0] == (
        f"fact {worked.F1}: acct:42 plan = (erased) (space org, by support-agent, attested)"
    )
    assert lines[-1] == "  acct:42 discount = (erased)  fact f2f2f2f2  no longer believed"


def test_the_extras_read_a_crypto_shred_ledger_whose_key_store_moved(
    fixture18: worked.Worked, cli: Cli
) -> None:
    """The refusal says "pass --key-store LOCATION (or --forget-mode plain ...)": the extras
    take both flags, as every other command that reads a ledger does."""
    vault = fixture18.root / "vault"
    vault.mkdir()
    _ledger(fixture18, "crypto-shred", vault / "ledger.keys")
    moved = fixture18.root / "moved.keys"
    (vault / "ledger.keys").rename(moved)
    base = ["--ledger", fixture18.ledger, "--receipts", fixture18.receipts]
    refused = cli("blast", *base, "--fact", worked.F1)
    assert refused.code == 1 and "pass --key-store LOCATION" in refused.err
    runs = {
        "blast": cli("blast", *base, "--fact", worked.F1, "--key-store", moved),
        "explain": cli("explain", *base, "--receipt", worked.R1, "--key-store", moved),
        "pack": cli(
            "pack",
            *base,
            "--fact",
            worked.F1,
            "--out",
            fixture18.root / "p.json",
            "--sign",
            fixture18.pack_key,
            "--forget-mode",
            "crypto-shred",
            "--key-store",
            moved,
        ),
        "review": cli("review", *base, "--key-store", moved, "--out", fixture18.root / "site"),
    }
    assert {name: r.code for name, r in runs.items()} == dict.fromkeys(runs, 0)
    page = (fixture18.root / "site" / "r" / f"{worked.R1}.html").read_text()
    for text in (runs["blast"].out, runs["explain"].out, runs["pack"].out, page):
        assert PLAN in text and "A256GCM" not in text
    sealed = cli("blast", *base, "--fact", worked.F1, "--forget-mode", "plain")
    assert sealed.code == 0 and "A256GCM" in sealed.out  # asked for: the values as stored


@pytest.mark.parametrize("command", ["pack", "explain"])
def test_a_pack_signed_before_a_forget_says_when_it_was_built(
    fixture18: worked.Worked, cli: Cli, command: str
) -> None:
    _ledger(fixture18, "plain")
    out = fixture18.root / "before.json"
    base = ["--ledger", fixture18.ledger, "--receipts", fixture18.receipts]
    what = ["--fact", worked.F1] if command == "pack" else ["--receipt", worked.R1]
    built = cli(command, *base, *what, "--out", out, "--sign", fixture18.pack_key)
    assert built.code == 0
    _forget(fixture18, "plain", worked.F1)
    check = cli(command, "--verify", out, "--key", fixture18.pack_pub)
    payload = json.loads(out.read_text())["payload"]
    generated = json.loads(base64.b64decode(payload))["predicate"]["generatedAt"]
    assert PLAN in check.out  # the signed pack still says what the ledger held then
    assert (
        check.out.rstrip("\n")
        .splitlines()[-1]
        .startswith(
            f"as of {generated}, when the pack was built: a belief forgotten, retracted or "
            "superseded since then still shows here as it was"
        )
    )


def test_claimed_facts_are_marked_in_blast_and_explain(fixture18: worked.Worked, cli: Cli) -> None:
    _ledger(fixture18, "plain", provenance="claimed")
    base = ["--ledger", fixture18.ledger, "--receipts", fixture18.receipts]
    blast = cli("blast", *base, "--fact", worked.F1).out.splitlines()
    assert (
        blast[-1] == f'  acct:42 discount = "{DISCOUNT}"  fact f2f2f2f2 (claimed)  STILL BELIEVED'
    )
    explained = cli("explain", *base, "--receipt", worked.R1).out.splitlines()
    assert f'  acct:42 discount = "{DISCOUNT}" [f2f2f2f2] (claimed) (space org)' in [
        line[29:] for line in explained
    ]
    assert f'  acct:42 plan = "{PLAN}" [f1f1f1f1] (space org)' in [line[29:] for line in explained]


@pytest.mark.parametrize("mode", MODES)
def test_the_review_server_stops_showing_a_value_another_writer_forgot(
    fixture18: worked.Worked, mode: str
) -> None:
    _ledger(fixture18, mode)
    reader = open_recorded(str(fixture18.ledger), reads_only=True)
    server = ReviewServer(ReviewOptions(str(fixture18.receipts), reader), "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:

        def page() -> str:
            with urllib.request.urlopen(f"{server.url}r/{worked.R1}", timeout=10) as answer:
                return str(answer.read().decode())

        assert PLAN in page()
        _forget(fixture18, mode, worked.F1)  # another writer: its own open of the ledger
        after = page()
        assert PLAN not in after and "acct:42 plan (erased) [f1f1f1f1]: forgotten" in after
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        reader.close()


def _forgets_first(
    w: worked.Worked, mode: str, monkeypatch: pytest.MonkeyPatch, ledger: Ledger, read: str
) -> None:
    """``ledger.<read>`` lets another writer forget F1 just before its first answer: a forget
    committed between two of the questions an extra asks."""
    real, done = getattr(ledger, read), []

    def ask(*args: Any, **kwargs: Any) -> Any:
        if not done:
            done.append(True)
            _forget(w, mode, worked.F1)
        return real(*args, **kwargs)

    monkeypatch.setattr(ledger, read, ask)


@pytest.mark.parametrize("mode", MODES)
def test_explain_reads_the_ledger_at_one_moment(
    fixture18: worked.Worked, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    _ledger(fixture18, mode)
    with open_recorded(str(fixture18.ledger), reads_only=True) as reader:
        _forgets_first(fixture18, mode, monkeypatch, reader, "history")
        pack = build_action_pack(fixture18.receipts, worked.R1, reader)
    [written] = [f for f in pack["written"] if f["factId"] == worked.F1]
    # Before the fix: the value read before the forget, the status after it.
    assert (written["value"], pack["status"][worked.F1]) == (PLAN, "believed")
    text = format_explain(pack, None, True)
    assert not [line for line in text.splitlines() if PLAN in line and "forgotten" in line]


@pytest.mark.parametrize("mode", MODES)
def test_pack_reads_the_ledger_at_one_moment(
    fixture18: worked.Worked, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    _ledger(fixture18, mode)
    with open_recorded(str(fixture18.ledger), reads_only=True) as reader:
        _forgets_first(fixture18, mode, monkeypatch, reader, "facts")
        pack = build_pack(reader, fixture18.receipts, worked.F1)
    # Before the fix: a history with the live value beside a fact already erased.
    assert [e["kind"] for e in pack["history"]] == ["assert"]
    assert pack["history"][0]["fact"]["value"] == PLAN
    # Crypto-shred: the key the forget destroyed after its commit opens nothing later in the
    # snapshot either; the value then reads as null (never an error, never the envelope).
    assert pack["fact"]["value"] == (PLAN if mode == "plain" else None)


def test_a_pack_of_a_forgotten_fact_says_its_write_receipt_holds_the_value(
    fixture18: worked.Worked, cli: Cli
) -> None:
    """The receipt of the call that wrote the fact carries its value (request args, result),
    signed by the gateway; the pack must carry it for its checks, so it says so (stdout, after
    the pack's lines; stderr keeps the one line SPEC-EXTRAS 4 gives it)."""
    _ledger(fixture18, "plain")
    base = ["--ledger", fixture18.ledger, "--receipts", fixture18.receipts, "--fact", worked.F1]
    sign = ["--sign", fixture18.pack_key]
    live = cli("pack", *base, "--out", fixture18.root / "live.json", *sign)
    assert live.code == 0 and "note:" not in live.out
    _forget(fixture18, "plain", worked.F1)
    out = fixture18.root / "erased.json"
    erased = cli("pack", *base, "--out", out, *sign)
    assert erased.code == 0 and erased.err == f"signed pack written to {out}\n"
    assert erased.out.splitlines()[-1].startswith(
        f"note: fact {worked.F1} is forgotten, but the pack holds receipt 11111111, the call "
        "that wrote it, with the value as the gateway signed it"
    )
    as_json = cli("pack", *base, "--out", out, "--force", *sign, "--json")
    assert json.loads(as_json.out)["factId"] == worked.F1  # JSON stays JSON

"""The operator's extras on a SQLite ledger after a forget, plain and crypto-shred (ninth review;
the core's ``tests/extras/test_review9_extras.py`` says the same of JSONL).

The worked fixture's receipts over a SQLite ledger whose values no receipt holds: after the
forget neither the value nor its salt shows in any extra, the other fact reads decrypted (never
its envelope), the extras change no byte of the ledger, a key store kept elsewhere is named with
``--key-store``, and the review server stops showing a value another connection forgot.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import sys
import threading
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main
from agent_custody_state.cli.common import open_recorded
from agent_custody_state.extras.review import ReviewOptions
from agent_custody_state.extras.review_server import ReviewServer

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "core" / "tests" / "extras"))
import worked  # the worked fixture of SPEC-EXTRAS 1.8

PLAN, DISCOUNT = "SECRET-PLAN-5b20", "SECRET-DISCOUNT-c41e"
MODES = ["plain", "crypto-shred"]


def run(*argv: Any) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue() + err.getvalue()


def _mode(mode: str, key_store: Path | None = None) -> dict[str, Any]:
    if mode == "plain":
        return {}
    return {"forget_mode": mode, **({"key_store": str(key_store)} if key_store else {})}


def _build(tmp_path: Path, mode: str, key_store: Path | None = None) -> tuple[Any, Path, str]:
    w = worked.build(tmp_path)
    path = tmp_path / "ledger.sqlite"
    with Ledger(path, **_mode(mode, key_store)) as ledger:
        salt = ""
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
                provenance="attested",
                receipt_id=receipt,
            )
            salt = salt or event.fact.extra["valueSalt"]
    return w, path, salt


def _forget(path: Path, mode: str) -> None:
    with Ledger(path, **_mode(mode)) as ledger:
        ledger.forget(fact_id=worked.F1, actor="user:admin", reason="erasure request")


def _files(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file() and p.name.startswith("ledger.sqlite") and not p.name.endswith("-shm")
    }


def _every_output(w: Any, path: Path, *more: str) -> str:
    keys = ["--issuer-key", w.gateway_pub, "--principal-key", w.principal_pub]
    base = ["--ledger", path, "--receipts", w.receipts, *more]
    outs = []
    for fact in (worked.F1, worked.F2):
        outs += [run("blast", *base, "--fact", fact, *j) for j in ((), ("--json",))]
        pack = w.root / f"pack-{fact[:2]}.json"
        outs.append(
            run("pack", *base, "--fact", fact, "--out", pack, "--sign", w.pack_key, "--force")
        )
        signed = json.loads(pack.read_text())
        outs.append((0, base64.b64decode(signed["payload"]).decode()))
    for receipt in (worked.R1, worked.R2, worked.R3):
        outs += [run("explain", *base, "--receipt", receipt, *keys, *j) for j in ((), ("--json",))]
    outs.append(run("review", *base, *keys, "--out", w.root / "site"))
    assert all(code == 0 for code, _ in outs), [text for code, text in outs if code]
    pages = [p.read_text() for p in sorted((w.root / "site").rglob("*")) if p.is_file()]
    return "\n".join([*(text for _, text in outs), *pages])


@pytest.mark.parametrize("mode", MODES)
def test_no_extra_shows_a_forgotten_value_and_none_changes_the_ledger(
    tmp_path: Path, mode: str
) -> None:
    w, path, salt = _build(tmp_path, mode)
    before = _every_output(w, path)
    assert PLAN in before and salt in before and "A256GCM" not in before
    _forget(path, mode)
    files = _files(tmp_path)
    after = _every_output(w, path)
    assert PLAN not in after and salt not in after
    assert DISCOUNT in after and "A256GCM" not in after
    assert _files(tmp_path) == files  # read-only opens: no byte of the ledger changed


def test_a_key_store_kept_elsewhere_is_named_with_key_store(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    w, path, _ = _build(tmp_path, "crypto-shred", vault / "ledger.keys")
    moved = tmp_path / "moved.keys"
    (vault / "ledger.keys").rename(moved)
    base = ["--ledger", path, "--receipts", w.receipts]
    code, text = run("blast", *base, "--fact", worked.F1)
    assert code == 1 and "pass --key-store LOCATION" in text
    code, text = run("explain", *base, "--receipt", worked.R1, "--key-store", moved)
    assert code == 0 and PLAN in text and "A256GCM" not in text


@pytest.mark.parametrize("mode", MODES)
def test_the_review_server_stops_showing_a_value_another_connection_forgot(
    tmp_path: Path, mode: str
) -> None:
    w, path, _ = _build(tmp_path, mode)
    reader = open_recorded(str(path), reads_only=True)
    server = ReviewServer(ReviewOptions(str(w.receipts), reader), "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:

        def page() -> str:
            with urllib.request.urlopen(f"{server.url}r/{worked.R1}", timeout=10) as answer:
                return str(answer.read().decode())

        assert PLAN in page()
        _forget(path, mode)
        after = page()
        assert PLAN not in after and "acct:42 plan (erased) [f1f1f1f1]: forgotten" in after
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        reader.close()

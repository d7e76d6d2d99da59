"""Sixth review: an erasure certificate of a SQLite ledger never claims a clean byte scan while
the forgotten value is still in the ledger's files.

A reader holding a snapshot keeps the forget's WAL truncation from running, so the old page
images stay in ``-wal``. A short value is found there whole; a long one (longer than a page)
lies in overflow pages, each led by a 4-byte page pointer, so only its pieces are: the scan
looks for slices of long values (``bytescan``'s ``fragment`` form) and the certificate is
partial, naming the hits.
"""

from __future__ import annotations

import base64
import json
import secrets
import sqlite3
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state import Ledger


def _predicate(done: Any) -> dict[str, Any]:
    return json.loads(base64.b64decode(done.certificate["payload"]))["predicate"]


def _long_value(marker: str, pieces: int) -> str:
    return "".join(f"{marker}-{i:05d}-{secrets.token_hex(4)} " for i in range(pieces))


def test_a_long_value_left_in_the_wal_by_a_reader_is_found(tmp_path: Path) -> None:
    marker = "MARK-" + secrets.token_hex(8)
    value = _long_value(marker, 400)  # about 15 kB: four overflow pages and more
    path = str(tmp_path / "ledger.sqlite")
    with Ledger(
        path,
        forget_mode="plain",
        checkpoint_key=Ed25519PrivateKey.generate(),
        busy_timeout=0.05,
    ) as ledger:
        fact = ledger.assert_fact(subject="s", predicate="p", value=value, space="o", actor="a")
        reader = sqlite3.connect(path)
        try:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM sqlite_master").fetchone()  # a read snapshot
            done = ledger.forget(fact_id=fact.fact_id, actor="dpo", reason="r", certificate=True)
            wal = Path(f"{path}-wal").read_bytes()
        finally:
            reader.close()
    assert marker.encode() in wal and value.encode() not in wal  # pieces only
    predicate = _predicate(done)
    scan = predicate["verification"]["byteScan"]
    assert scan["hits"] > 0 and "fragment" in scan["forms"]
    assert predicate["outcome"] == "partial"


def test_a_long_value_forgotten_without_readers_scans_clean(tmp_path: Path) -> None:
    """The slices find nothing once the value is gone: the fix does not make every long
    value's certificate partial."""
    marker = "MARK-" + secrets.token_hex(8)
    value = _long_value(marker, 400)
    path = tmp_path / "ledger.sqlite"
    with Ledger(
        str(path), forget_mode="plain", checkpoint_key=Ed25519PrivateKey.generate()
    ) as ledger:
        fact = ledger.assert_fact(subject="s", predicate="p", value=value, space="o", actor="a")
        done = ledger.forget(fact_id=fact.fact_id, actor="dpo", reason="r", certificate=True)
        on_disk = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert marker.encode() not in on_disk
    predicate = _predicate(done)
    assert predicate["verification"]["byteScan"]["hits"] == 0
    assert predicate["outcome"] == "complete"

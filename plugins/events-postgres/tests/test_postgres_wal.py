"""Where a forgotten value's bytes remain on a PostgreSQL server today (issue 11.5): in ``pg_wal``.

A forget rewrites the assert row and ``VACUUM FULL`` rewrites the table, so the relation files
hold no copy. But every change was first written to the write-ahead log, and the INSERT that
stored the value (and any full-page image of a page holding it) stays in the WAL segments until
PostgreSQL retires them after later checkpoints; archives, replicas and backups keep their own
copies for as long as they are kept (docs/forget.md, "Where bytes can remain").

This test documents that behaviour as it is, so it fails the day it changes: crypto-shredding (a
later issue) will make the WAL copies unreadable, and then the ``pg_wal`` assertion must flip.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from agent_custody_state import Ledger
from agent_custody_state_conformance.postgres import EmbeddedPostgres

pytestmark = pytest.mark.postgres


def _values(marker: str) -> list[object]:
    """Seven values of different shapes, each carrying the marker (short: no TOAST compression)."""
    return [
        f"{marker}-0",
        {"email": f"{marker}-1@example.org"},
        [f"{marker}-2", 1, 2.5],
        {"nested": {"deeper": [f"{marker}-3"]}},
        f"pässwörd {marker}-4",
        {"note": f"{marker}-5", "n": 12345678901234},
        f"{marker}-6 " + "lorem ipsum " * 50,  # longer, still well under the TOAST limit
    ]


def _split(server: EmbeddedPostgres, needle: bytes) -> tuple[list[Path], list[Path]]:
    """Files holding ``needle``: (relation and other files outside pg_wal, WAL segments)."""
    found = server.files_containing(needle)
    wal = [p for p in found if p.relative_to(server.data_dir).parts[0] == "pg_wal"]
    return [p for p in found if p not in wal], wal


def _occurrences(paths: list[Path], needle: bytes) -> int:
    return sum(p.read_bytes().count(needle) for p in paths if p.exists())


def test_forgotten_values_remain_in_pg_wal_until_the_segments_are_retired(
    postgres_url: str, embedded_postgres: EmbeddedPostgres
) -> None:
    """After a forget (with its ``VACUUM FULL``) and a checkpoint, no relation file holds any of
    seven forgotten values, while ``pg_wal`` still holds every one of them. Only retiring the
    segments (a WAL switch and checkpoints, with ``wal_recycle = off`` as on this test server)
    removes them; with recycling on (the default) a retired segment is renamed and reused, and
    keeps its old bytes until it is overwritten. Kept values are checked by the same scans."""
    server = embedded_postgres
    marker = f"walprobe-{uuid.uuid4().hex}"
    # Start in a fresh segment: the writes below are small, so they and the checkpoint's redo
    # point share one segment, which that checkpoint cannot retire (earlier tests on this server
    # may have left the current segment nearly full, and a switch mid-test would retire it).
    server.rotate_wal()
    with Ledger(f"{postgres_url}&table=walprobe") as ledger:
        facts = [
            ledger.assert_fact(subject=f"s{i}", predicate="p", value=value, space="org", actor="a")
            for i, value in enumerate(_values(marker))
        ]
        control = ledger.assert_fact(
            subject="keep", predicate="p", value=f"{marker}-kept", space="org", actor="a"
        )
        for fact in facts:
            ledger.forget(fact_id=fact.fact_id, actor="dpo", reason="erasure")
        assert all(ledger.get(f.fact_id).value is None for f in facts)  # type: ignore[union-attr]
        assert ledger.get(control.fact_id).value == f"{marker}-kept"  # type: ignore[union-attr]
    server.checkpoint()  # every committed page is in the relation files before we look
    needles = [f"{marker}-{i}".encode() for i in range(len(facts))]
    scans = [_split(server, n) for n in needles]
    assert [[str(p) for p in relations] for relations, _ in scans] == [[]] * len(facts)
    held = [n for n, (_, wal) in zip(needles, scans, strict=True) if wal]
    assert held == needles, "every forgotten value is expected in pg_wal until crypto-shredding"
    copies = [_occurrences(wal, n) for n, (_, wal) in zip(needles, scans, strict=True)]
    segments = {p for _, wal in scans for p in wal}
    print(
        f"\npg_wal after forget: {len(held)}/{len(needles)} values, copies per value "
        f"{copies}, in {len(segments)} segment(s)"
    )
    kept_relations, kept_wal = _split(server, f"{marker}-kept".encode())
    assert kept_relations and kept_wal  # the scans see what they look for

    server.rotate_wal()
    assert [_split(server, n)[1] for n in needles] == [[]] * len(facts)
    assert _split(server, f"{marker}-kept".encode())[0]  # the live row is untouched

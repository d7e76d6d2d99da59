"""Mutations of a stored ledger for ``bench_chain.py`` (a): single-byte edits, row deletions,
swaps and truncations, each applied alone, to a JSONL file's bytes or inside a rolled-back
transaction on the ``events`` table, and the reports of the sequential and parallel verifiers.
"""

from __future__ import annotations

import os
import random
import sqlite3
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from agent_custody_state.backends.jsonl_lines import stored_lines
from agent_custody_state.ledger.checkpoints import Checkpoint
from agent_custody_state.ledger.parallel import verify_parallel
from agent_custody_state.ledger.verify import verify_lines

KINDS = ("byte", "delete", "swap", "truncate")
PRINTABLE = [chr(c) for c in range(0x20, 0x7F)]

Trial = Callable[[str, random.Random], tuple[list[Any], int]]


def jsonl_trials(path: Path, scratch: Path) -> Trial:
    data = path.read_bytes()
    lock = os.open(scratch.with_suffix(".lock"), os.O_RDWR | os.O_CREAT)

    def trial(kind: str, rng: random.Random) -> tuple[list[Any], int]:
        lines = data.split(b"\n")[:-1]
        if kind == "byte":  # any byte but the final newline, replaced by a different byte
            at = rng.randrange(len(data) - 1)
            new = rng.choice([b for b in range(256) if b != data[at]])
            out, expected = data[:at] + bytes([new]) + data[at + 1 :], data.count(b"\n", 0, at) + 1
        elif kind == "delete":
            i = rng.randrange(len(lines))
            out, expected = b"".join(x + b"\n" for j, x in enumerate(lines) if j != i), i + 1
        elif kind == "swap":
            i, j = sorted(rng.sample(range(len(lines)), 2))
            lines[i], lines[j] = lines[j], lines[i]
            out, expected = b"".join(x + b"\n" for x in lines), i + 1
        else:
            at = rng.randrange(len(data) - 1)
            # A cut just before a newline keeps that whole line (a last line without its
            # newline is read as complete): the first missing event is the next one.
            whole = data[at] == 10
            out, expected = data[:at], data.count(b"\n", 0, at) + 1 + whole
        scratch.write_bytes(out)
        return list(stored_lines(scratch, lock)), expected

    return trial


def sql_trials(run: Callable[[Callable[[Any], list[Any]]], list[Any]], param: str) -> Trial:
    """Mutations of the events table inside a rolled-back transaction (``run`` provides it)."""
    rows = run(lambda cur: cur.execute("SELECT seq, json FROM events ORDER BY seq").fetchall())
    seqs = [r[0] for r in rows]
    texts = [r[1] for r in rows]
    update = f"UPDATE events SET json = {param} WHERE seq = {param}"

    def trial(kind: str, rng: random.Random) -> tuple[list[Any], int]:
        def mutate(cur: Any) -> list[Any]:
            nonlocal expected
            if kind == "byte":
                i = rng.randrange(len(texts))
                text = texts[i]
                at = rng.randrange(len(text))
                ch = rng.choice([c for c in PRINTABLE if c != text[at]])
                cur.execute(update, (text[:at] + ch + text[at + 1 :], seqs[i]))
                expected = i + 1
            elif kind == "delete":
                i = rng.randrange(len(seqs))
                cur.execute(f"DELETE FROM events WHERE seq = {param}", (seqs[i],))
                expected = i + 1
            elif kind == "swap":
                i, j = sorted(rng.sample(range(len(seqs)), 2))
                cur.execute(update, (texts[j], seqs[i]))
                cur.execute(update, (texts[i], seqs[j]))
                expected = i + 1
            else:
                k = rng.randrange(len(seqs))
                cur.execute(f"DELETE FROM events WHERE seq > {param}", (seqs[k - 1] if k else 0,))
                expected = k + 1
            return [r[0] for r in cur.execute("SELECT json FROM events ORDER BY seq").fetchall()]

        expected = 0
        stored = run(mutate)
        return stored, expected

    return trial


def sqlite_runner(path: Path) -> Callable[[Callable[[Any], list[Any]]], list[Any]]:
    conn = sqlite3.connect(path, isolation_level=None)

    def run(fn: Callable[[Any], list[Any]]) -> list[Any]:
        conn.execute("BEGIN")
        try:
            return fn(conn)
        finally:
            conn.execute("ROLLBACK")

    return run


def postgres_runner(url: str) -> Callable[[Callable[[Any], list[Any]]], list[Any]]:
    import psycopg

    conn = psycopg.connect(url, autocommit=True)

    def run(fn: Callable[[Any], list[Any]]) -> list[Any]:
        with conn.transaction(force_rollback=True), conn.cursor() as cur:
            return fn(cur)

    return run


def mutation_test(
    trial: Trial, cps: list[Checkpoint], count: int, seed: int, pool: Any
) -> dict[str, Any]:
    """Each mutated ledger verified in this process and, in chunks of 32 events, by ``pool``'s
    workers: both must report the same (``parallel_same``)."""
    rng = random.Random(seed)
    out: dict[str, Any] = {}
    for kind in KINDS:
        detected = named = same = 0
        misses: list[str] = []
        for _ in range(count):
            stored, expected = trial(kind, rng)
            report = verify_lines(stored, checkpoints=cps)
            par = verify_parallel(stored, checkpoints=cps, executor=pool, chunk=32)
            same += asdict(par) == asdict(report)
            first = report.first
            detected += not report.ok
            named += first is not None and first.seq == expected
            if (first is None or first.seq != expected) and len(misses) < 5:
                misses.append(f"expected {expected}, got {first}")
        out[kind] = {
            "trials": count,
            "detected": detected,
            "first_bad_named": named,
            "parallel_same": same,
        }
        if misses:
            out[kind]["misses"] = misses
    return out

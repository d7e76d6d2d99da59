"""The chain's benchmarks (issue 12): mutation detection, verify throughput, append cost.

(a) **Mutation test**, per backend: a ledger written through ``Ledger`` (asserts, batches,
    retracts, forgets, a checkpoint at the end), then random single-byte edits, row deletions,
    row swaps and truncations (2,500 of each, 10,000 per backend), each applied alone to the
    stored ledger: for JSONL to the file's bytes (read back by the same reader as
    ``agent-custody-memory verify``), for SQLite and PostgreSQL to the ``events`` table inside
    a transaction that is rolled back after the rows are read (an edit there replaces one
    character of one row's JSON with another printable ASCII character, since PostgreSQL text
    must stay valid UTF-8). Each must fail ``verify`` with the first bad event at the position
    mutated.
(b) **Verify throughput** (events/s) over a generated, chained ledger of 1M events (JSONL file
    and SQLite table), single process.
(c) **Append cost** of the chain: ``Ledger(chain=True)`` against ``Ledger(chain=False)`` on the
    same backend, durable single appends (``assert_fact``) and batched ingest (``assert_many``
    of 1,000), the two ledgers written in turns so load and drift hit both alike; medians.

Usage::

    python bench/bench_chain.py --quick                 # seconds: small sizes, JSONL + SQLite
    python bench/bench_chain.py --backend jsonl sqlite postgres

Results go to ``bench/out/chain.json`` and a table on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state import Ledger
from agent_custody_state.backends.jsonl_lines import stored_lines
from agent_custody_state.ledger.chain import ZERO_HEAD, ChainHead, seal
from agent_custody_state.ledger.checkpoints import Checkpoint, read_checkpoints
from agent_custody_state.ledger.model import AssertEvent, Fact, RetractEvent, Source
from agent_custody_state.ledger.verify import verify_lines

OUT = Path(__file__).resolve().parent / "out"
# Large JSONL ledgers are built on purpose here: past the backend's default open limit.
os.environ.setdefault("AGENT_CUSTODY_JSONL_MAX_MB", "0")
KINDS = ("byte", "delete", "swap", "truncate")
PRINTABLE = [chr(c) for c in range(0x20, 0x7F)]


# -- building ledgers ----------------------------------------------------------------------------


def _item(rng: random.Random, i: int) -> dict[str, Any]:
    value: Any = rng.choice(
        [f"plan-{i}", i, {"tier": "pro", "seats": rng.randint(1, 99)}, [1.5, "é", None]]
    )
    return {"subject": f"acct:{i % 97}", "predicate": "plan", "value": value}


def build(location: str, n: int, key: Ed25519PrivateKey, rng: random.Random) -> list[Checkpoint]:
    """About ``n`` events through the ledger: batches, singles, retracts, forgets, confirms."""
    with Ledger(location, checkpoint_key=key, checkpoint_every=max(1, n // 4)) as ledger:
        ids: list[str] = []
        while ledger.count() < n:
            roll = rng.random()
            if roll < 0.3 or len(ids) < 4:
                items = [_item(rng, len(ids) + j) for j in range(rng.randint(2, 6))]
                batch = [{**it, "space": "org", "actor": "a"} for it in items]
                ids += [e.fact_id for e in ledger.assert_many(batch)]
            elif roll < 0.6:
                ids.append(
                    ledger.assert_fact(**_item(rng, len(ids)), space="org", actor="a").fact_id
                )
            elif roll < 0.75:
                ledger.forget(fact_id=ids.pop(rng.randrange(len(ids))), actor="a", reason="gdpr")
            elif roll < 0.9:
                ledger.retract(fact_id=ids.pop(rng.randrange(len(ids))), actor="a", reason="r")
            else:
                ledger.confirm(fact_id=ids.pop(rng.randrange(len(ids))), actor="a")
        ledger.checkpoint()
        log = ledger.backend.checkpoint_log()
        assert log is not None
        return read_checkpoints("\n".join(log.notes()))


# -- (a) mutations -------------------------------------------------------------------------------

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


def mutation_test(trial: Trial, cps: list[Checkpoint], count: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    out: dict[str, Any] = {}
    for kind in KINDS:
        detected = named = 0
        misses: list[str] = []
        for _ in range(count):
            stored, expected = trial(kind, rng)
            report = verify_lines(stored, checkpoints=cps)
            first = report.first
            detected += not report.ok
            named += first is not None and first.seq == expected
            if (first is None or first.seq != expected) and len(misses) < 5:
                misses.append(f"expected {expected}, got {first}")
        out[kind] = {"trials": count, "detected": detected, "first_bad_named": named}
        if misses:
            out[kind]["misses"] = misses
    return out


# -- (b) verify throughput -----------------------------------------------------------------------


def generated(n: int, seed: int = 7) -> Iterator[str]:
    """``n`` chained events (asserts, one retract in five) as JSONL lines, sealed in batches."""
    rng = random.Random(seed)
    head = ChainHead(0, ZERO_HEAD, chained=False)
    for start in range(0, n, 5000):
        batch: list[Any] = []
        for i in range(start, min(n, start + 5000)):
            tx = f"2026-01-01T00:{(i // 60000) % 60:02d}:{(i // 1000) % 60:02d}.{i % 1000:03d}Z"
            if i % 5 == 4:
                batch.append(RetractEvent(f"e{i}", tx, f"f{i - 1}", "ops", "wrong", Source(None)))
            else:
                value = _item(rng, i)
                fact = Fact(
                    f"f{i}", value["subject"], "plan", value["value"], "org", "a", valid_from=tx
                )
                batch.append(AssertEvent(f"e{i}", tx, fact))
        sealed = seal(head, batch)
        record = sealed[-1].extra["chain"]
        head = ChainHead(record["seq"], record["head"])
        yield from (e.to_json() for e in sealed)


def throughput(workdir: Path, n: int) -> dict[str, Any]:
    path = workdir / f"big-{n}.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        fh.writelines(line + "\n" for line in generated(n))
    lock = os.open(workdir / "big.lock", os.O_RDWR | os.O_CREAT)
    out: dict[str, Any] = {"events": n, "bytes": path.stat().st_size}
    started = time.perf_counter()
    report = verify_lines(stored_lines(path, lock))
    elapsed = time.perf_counter() - started
    assert report.ok and report.events == n, report.problems[:3]
    out["jsonl_events_per_s"] = round(n / elapsed)
    db = workdir / f"big-{n}.sqlite"
    db.unlink(missing_ok=True)
    with Ledger(db, chain=False) as ledger:  # creates the table; rows loaded directly
        pass
    conn = sqlite3.connect(db)
    with open(path, encoding="utf-8") as fh:
        conn.executemany(
            "INSERT INTO events (event_id, kind, tx_time, fact_id, json) VALUES (?, ?, ?, ?, ?)",
            ((str(i), "x", "t", "f", line.rstrip("\n")) for i, line in enumerate(fh)),
        )
    conn.commit()
    conn.close()
    with Ledger(db) as ledger:
        started = time.perf_counter()
        report = verify_lines(ledger.backend.stored_events())
        elapsed = time.perf_counter() - started
    assert report.ok and report.events == n, report.problems[:3]
    out["sqlite_events_per_s"] = round(n / elapsed)
    db.unlink()
    return out


# -- (c) append cost -----------------------------------------------------------------------------


def append_cost(make: Callable[[str], str], singles: int, batches: int) -> dict[str, Any]:
    """Two ledgers on the same backend, one with the chain and one without, written in turns
    (the order flipped at random each time), so load and drift hit both alike; medians."""
    rng = random.Random(3)
    times: dict[bool, dict[str, list[float]]] = {c: {"single": [], "batch": []} for c in (0, 1)}
    with Ledger(make("cost-plain"), chain=False) as plain, Ledger(make("cost-chain")) as chained:
        ledgers = {False: plain, True: chained}
        for i in range(singles + batches):
            order = [False, True]
            rng.shuffle(order)
            for chain in order:
                ledger = ledgers[chain]
                if i < singles:
                    item = _item(rng, i)
                    started = time.perf_counter()
                    ledger.assert_fact(**item, space="org", actor="a")
                    times[chain]["single"].append(time.perf_counter() - started)
                else:
                    items = [{**_item(rng, j), "space": "org", "actor": "a"} for j in range(1000)]
                    started = time.perf_counter()
                    ledger.assert_many(items)
                    times[chain]["batch"].append((time.perf_counter() - started) / 1000)
        assert verify_lines(chained.backend.stored_events()).ok
    med = {(c, k): statistics.median(v) for c in (0, 1) for k, v in times[c].items()}
    return {
        "single_append_us": round(med[0, "single"] * 1e6, 1),
        "single_append_chain_us": round(med[1, "single"] * 1e6, 1),
        "single_overhead_pct": round((med[1, "single"] / med[0, "single"] - 1) * 100, 1),
        "batch_event_us": round(med[0, "batch"] * 1e6, 1),
        "batch_event_chain_us": round(med[1, "batch"] * 1e6, 1),
        "batch_overhead_pct": round((med[1, "batch"] / med[0, "batch"] - 1) * 100, 1),
    }


def _fresh(backend: str, name: str, pg: Any) -> str:
    """A new, empty ledger location of ``backend`` (durable storage, not /dev/shm)."""
    if backend == "postgres":
        return f"{pg.url}{'&' if '?' in pg.url else '?'}table={name.replace('-', '_')}"
    return str(Path(tempfile.mkdtemp(prefix="acs-cost-")) / f"{name}.{backend}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument(
        "--backend", nargs="+", default=["jsonl", "sqlite"], choices=["jsonl", "sqlite", "postgres"]
    )
    parser.add_argument(
        "--mutations", type=int, help="trials per kind and backend (2,500: 10,000 per backend)"
    )
    parser.add_argument("--events", type=int, help="verify throughput size (1,000,000)")
    parser.add_argument(
        "--parts",
        nargs="+",
        default=["mutations", "append", "verify"],
        choices=["mutations", "append", "verify"],
    )
    args = parser.parse_args()
    quick = args.quick
    mutations = args.mutations or (250 if quick else 2_500)
    events = args.events or (20_000 if quick else 1_000_000)
    workdir = Path(
        tempfile.mkdtemp(
            prefix="acs-bench-chain-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None
        )
    )
    results: dict[str, Any] = {"quick": quick, "mutations": {}, "append": {}}
    key = Ed25519PrivateKey.generate()
    pg = None
    if "postgres" in args.backend:
        from agent_custody_state_conformance.postgres import start_embedded_postgres

        base = Path(tempfile.mkdtemp(prefix="acs-bench-pg-"))
        os.chmod(base, 0o755)
        pg = start_embedded_postgres(base)
    try:
        for backend in args.backend:
            rng = random.Random(11)
            if backend == "postgres":
                assert pg is not None
                location = pg.url
                cps = build(location, 300, key, rng)
                trial = sql_trials(postgres_runner(location), "%s")
            else:
                location = str(workdir / f"mut.{backend}")
                cps = build(location, 300, key, rng)
                if backend == "jsonl":
                    trial = jsonl_trials(Path(location), workdir / "scratch.jsonl")
                else:
                    trial = sql_trials(sqlite_runner(Path(location)), "?")
            assert all(cp.check_signature(key.public_key()) is None for cp in cps)
            if "mutations" in args.parts:
                results["mutations"][backend] = mutation_test(trial, cps, mutations, seed=5)
                print(backend, "mutations", json.dumps(results["mutations"][backend]), flush=True)
            if "append" in args.parts:
                singles, batches = (60, 6) if quick else (1000, 60)
                results["append"][backend] = append_cost(
                    lambda name, b=backend: _fresh(b, name, pg), singles, batches
                )
                print(backend, "append", json.dumps(results["append"][backend]), flush=True)
        if "verify" in args.parts:
            results["verify"] = throughput(workdir, events)
            print("verify", json.dumps(results["verify"]), flush=True)
    finally:
        if pg is not None:
            pg.stop()
        shutil.rmtree(workdir, ignore_errors=True)  # the 1M-event file is half a gigabyte
    OUT.mkdir(exist_ok=True)
    name = "quick" if quick else "-".join([*args.parts, *args.backend])
    (OUT / f"chain-{name}.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

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
    Each mutated ledger is also verified in parallel (chunks of 32 events, two workers): the
    report must be the sequential one.
(b) **Verify throughput** (events/s) over a generated, chained ledger of 1M events (JSONL file
    and SQLite table), in one process and with ``--jobs`` workers (default: one per processor).
(c) **Append cost** of the chain: ``Ledger(chain=True)`` against ``Ledger(chain=False)`` on the
    same backend, durable single appends (``assert_fact``) and batched ingest (``assert_many``
    of 1,000), the two ledgers written in turns so load and drift hit both alike; medians.
    Beside it, the floor the leaf's definition sets (``leaf_floor``: its hashes and encodings
    alone, per event) as a share of the plain batched append.

Usage::

    python bench/bench_chain.py --quick                 # seconds: small sizes, JSONL + SQLite
    python bench/bench_chain.py --backend jsonl sqlite postgres

Results go to ``bench/out/chain.json`` and a table on stdout.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state import Ledger
from agent_custody_state.backends.jsonl_lines import stored_lines
from agent_custody_state.ledger.chain import ZERO_HEAD, ChainHead, seal
from agent_custody_state.ledger.checkpoints import Checkpoint, read_checkpoints
from agent_custody_state.ledger.model import (
    AssertEvent,
    Fact,
    RetractEvent,
    Source,
    event_from_json,
)
from agent_custody_state.ledger.parallel import (
    CHUNK,
    default_jobs,
    verify_parallel,
    verify_stored,
    worker_pool,
)
from agent_custody_state.ledger.verify import verify_lines
from agent_custody_state_sql.schema import ROW_COLUMNS, event_values
from benchkit.mutations import (
    jsonl_trials,
    mutation_test,
    postgres_runner,
    sql_trials,
    sqlite_runner,
)

OUT = Path(__file__).resolve().parent / "out"
# Large JSONL ledgers are built on purpose here: past the backend's default open limit.
os.environ.setdefault("AGENT_CUSTODY_JSONL_MAX_MB", "0")


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


def throughput(workdir: Path, n: int, jobs: int) -> dict[str, Any]:
    path = workdir / f"big-{n}.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        fh.writelines(line + "\n" for line in generated(n))
    lock = os.open(workdir / "big.lock", os.O_RDWR | os.O_CREAT)
    out: dict[str, Any] = {"events": n, "bytes": path.stat().st_size, "jobs": jobs}
    out["jsonl"] = _rates(lambda: stored_lines(path, lock), n, jobs)
    db = workdir / f"big-{n}.sqlite"
    db.unlink(missing_ok=True)
    with Ledger(db, chain=False) as ledger:  # creates the table; rows loaded directly
        pass
    conn = sqlite3.connect(db)
    with open(path, encoding="utf-8") as fh:  # the rows as the backend writes them
        conn.executemany(
            f"INSERT INTO events ({', '.join(ROW_COLUMNS)}) VALUES ({', '.join('?' * 9)})",
            (event_values(event_from_json(line)) for line in fh),
        )
    conn.commit()
    conn.close()
    with Ledger(db) as ledger:
        backend = ledger.backend
        out["sqlite"] = _rates(backend.stored_events, n, jobs)
        # The query columns against the JSON too (``EventBackend.index_problems``), on a thread
        # beside the chain's pass over the events read here: what ``verify`` did before the
        # workers read their chunks themselves.
        out["sqlite_with_columns_thread"] = _rates(
            backend.stored_events, n, jobs, columns=backend.index_problems
        )
        # What ``agent-custody-memory verify`` does on SQL now: each worker reads its chunk and
        # checks its columns in the same statement (``stored_chunks``, ``ledger.stored``).
        out["sqlite_with_columns"] = _rates(
            lambda: backend.stored_chunks(CHUNK), n, jobs, run=verify_stored
        )
    db.unlink()
    return out


def _rates(
    stored: Callable[[], Any],
    n: int,
    jobs: int,
    columns: Callable[[], Any] | None = None,
    run: Callable[..., Any] = verify_parallel,
) -> dict[str, Any]:
    """Events/s verifying ``stored()`` (with ``run``) in this process, then with ``jobs``
    workers, in turns (twice each, the better of two kept), with the machine's load at the
    end; with ``columns``, that check runs on a thread beside it."""
    best: dict[str, float] = {}
    for _ in range(2):
        for name, workers in (("single", 1), ("parallel", jobs)):
            started = time.perf_counter()
            with ThreadPoolExecutor(1) as pool:
                found = pool.submit(columns) if columns is not None else None
                report = run(stored(), jobs=workers)
                assert found is None or found.result() == []
            elapsed = time.perf_counter() - started
            assert report.ok and report.events == n, report.problems[:3]
            best[name] = min(best.get(name, elapsed), elapsed)
    return {
        "single_events_per_s": round(n / best["single"]),
        "parallel_events_per_s": round(n / best["parallel"]),
        "speedup": round(best["single"] / best["parallel"], 2),
        "load_1min": os.getloadavg()[0],
    }


# -- (c) append cost -----------------------------------------------------------------------------


def leaf_floor(events: list[AssertEvent]) -> float:
    """Seconds per event of the primitives the leaf's definition itself asks for, and nothing
    else: a 32-byte salt (one draw for the batch), ``HMAC-SHA256(salt, canonical(value))``, the
    canonical bytes of the redacted form, the two SHA-256 of leaf and link, and the text of
    salt, commitment, leaf and head; orjson, the fastest encoder at hand, and the redacted
    forms built beforehand (untimed). The chain cannot cost less than this per event in this
    interpreter, whatever the code around it: set beside the plain batched append of the same
    run, it shows how much of the 10% target the definition leaves."""
    import binascii

    import orjson

    from agent_custody_state.ledger.digests import hmac_sha256

    pairs = []
    for event in events:
        data = event.to_dict()
        data.pop("chain", None)
        value = data["fact"].pop("value")
        data["fact"].pop("valueSalt", None)
        pairs.append((value, data))
    sha256, dumps, sort = hashlib.sha256, orjson.dumps, orjson.OPT_SORT_KEYS
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        salts = os.urandom(32 * len(pairs))
        previous = bytes(32)
        for i, (value, red) in enumerate(pairs):
            salt = salts[i * 32 : i * 32 + 32]
            hmac_sha256(salt, dumps(value, option=sort)).hex()
            leaf = sha256(b"\x00" + dumps(red, option=sort)).digest()
            previous = sha256(b"\x01" + previous + leaf).digest()
            binascii.b2a_base64(salt, newline=False)
            leaf.hex()
            previous.hex()
        best = min(best, (time.perf_counter() - started) / len(pairs))
    return best


def append_cost(make: Callable[[str], str], singles: int, batches: int) -> dict[str, Any]:
    """Two ledgers on the same backend, one with the chain and one without, written in turns
    (the order flipped at random each time), so load and drift hit both alike; medians."""
    rng = random.Random(3)
    times: dict[bool, dict[str, list[float]]] = {c: {"single": [], "batch": []} for c in (0, 1)}
    floors: list[float] = []
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
                    written = ledger.assert_many(items)
                    times[chain]["batch"].append((time.perf_counter() - started) / 1000)
                    if chain:
                        floors.append(leaf_floor(written))
        assert verify_lines(chained.backend.stored_events()).ok
    med = {(c, k): statistics.median(v) for c in (0, 1) for k, v in times[c].items()}
    return {
        "single_append_us": round(med[0, "single"] * 1e6, 1),
        "single_append_chain_us": round(med[1, "single"] * 1e6, 1),
        "single_overhead_pct": round((med[1, "single"] / med[0, "single"] - 1) * 100, 1),
        "batch_event_us": round(med[0, "batch"] * 1e6, 1),
        "batch_event_chain_us": round(med[1, "batch"] * 1e6, 1),
        "batch_overhead_pct": round((med[1, "batch"] / med[0, "batch"] - 1) * 100, 1),
        # The leaf's own primitives (``leaf_floor``) against the plain batched append.
        "leaf_floor_us": round(statistics.median(floors) * 1e6, 2),
        "leaf_floor_pct": round(statistics.median(floors) / med[0, "batch"] * 100, 1),
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
    parser.add_argument(
        "--jobs", type=int, default=default_jobs(), help="workers of the parallel verify"
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
                with worker_pool(2) as workers:
                    results["mutations"][backend] = mutation_test(
                        trial, cps, mutations, seed=5, pool=workers
                    )
                print(backend, "mutations", json.dumps(results["mutations"][backend]), flush=True)
            if "append" in args.parts:
                singles, batches = (60, 6) if quick else (1000, 60)
                results["append"][backend] = append_cost(
                    lambda name, b=backend: _fresh(b, name, pg), singles, batches
                )
                print(backend, "append", json.dumps(results["append"][backend]), flush=True)
        if "verify" in args.parts:
            results["verify"] = throughput(workdir, events, args.jobs)
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

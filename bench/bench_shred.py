"""Crypto-shred cost (issue 12, item 4): each figure beside plain mode, measured in the same run.

For each backend (JSONL, SQLite, PostgreSQL on the embedded server):

* **durable single appends**: ``Ledger.assert_fact`` on a plain ledger and on a crypto-shred
  ledger, in alternating rounds (so drift in the machine's load hits both alike);
* **batched ingest**: ``Ledger.assert_many`` in batches of 5000, alternating batch by batch;
* **as-of read by subject, p50/p99**: on *the same* crypto-shred ledger (a generated history
  with supersessions, retractions, confirmations, holds), read through the crypto-shred ledger
  (keys fetched, envelopes opened) and through a plain view of the same files (envelopes left
  closed), alternating read by read; a plain ledger of the same history is read too.

Overhead = (plain rate / shred rate - 1) for writes, (shred time / plain time - 1) for reads;
the target is at most 10% on writes. Usage::

    python bench/bench_shred.py --quick                 # a minute: every backend, small counts
    python bench/bench_shred.py --backend sqlite postgres --appends 2000 --ingest 100000

Results go to ``bench/out/shred.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_custody_state import Ledger

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit.backend_figures import _pct
from benchkit.history import BATCH, PREDICATES, SPACES, generate

OUT = Path(__file__).resolve().parent / "out"
# Large JSONL ledgers are built on purpose here: past the backend's default open limit.
os.environ.setdefault("AGENT_CUSTODY_JSONL_MAX_MB", "0")
SHRED = {"forget_mode": "crypto-shred"}


def _value(i: int) -> dict[str, Any]:
    return {"v": i, "note": f"value {i}: a sentence of ordinary length about acct:{i // 4}"}


def appends(make: Callable[[str], str], n: int) -> dict[str, float]:
    """Durable single appends, plain and crypto-shred alternating call by call (the order
    swapped every call), so both see the same disk and the same neighbours' load."""
    spent: dict[str, list[float]] = {"plain": [], "shred": []}
    with Ledger(make("append-plain")) as plain, Ledger(make("append-shred"), **SHRED) as shred:
        for i in range(n):
            order = [("plain", plain), ("shred", shred)]
            if i % 2:
                order.reverse()
            for name, ledger in order:
                start = time.perf_counter()
                ledger.assert_fact(
                    subject=f"acct:{i}", predicate="p", value=_value(i), space="org", actor="b"
                )
                spent[name].append(time.perf_counter() - start)
    out = {f"append_{k}_per_s": n / sum(v) for k, v in spent.items()}
    out |= {f"append_{k}_p50_ms": _pct(v, 0.5) * 1e3 for k, v in spent.items()}
    return out


def ingest(make: Callable[[str], str], n: int) -> dict[str, float]:
    """Batched ingest (assert_many, 5000 a batch), plain and crypto-shred alternating."""
    items = [
        {
            "subject": f"acct:{i // 4}",
            "predicate": PREDICATES[i % 4],
            "value": _value(i),
            "space": SPACES[i % 8],
            "actor": "bench",
            "receipt_id": f"rcpt-{i}",
        }
        for i in range(n)
    ]
    spent = {"plain": 0.0, "shred": 0.0}
    with Ledger(make("ingest-plain")) as plain, Ledger(make("ingest-shred"), **SHRED) as shred:
        for b, k in enumerate(range(0, n, BATCH)):
            order = [("plain", plain), ("shred", shred)]
            if b % 2:
                order.reverse()
            for name, ledger in order:
                start = time.perf_counter()
                ledger.assert_many(items[k : k + BATCH])
                spent[name] += time.perf_counter() - start
    return {"ingest_plain_per_s": n / spent["plain"], "ingest_shred_per_s": n / spent["shred"]}


def reads(make: Callable[[str], str], n_events: int, n_reads: int) -> dict[str, float]:
    """As-of by subject on the same crypto-shred ledger, opened and closed envelopes; and on a
    plain ledger of the same history."""
    shred_loc, plain_loc = make("read-shred"), make("read-plain")
    for location, options in ((shred_loc, SHRED), (plain_loc, {})):
        with Ledger(location, **options) as ledger:  # type: ignore[arg-type]
            ledger.import_events(generate(n_events, seed=5), batch_size=BATCH)
    subjects = max(1, n_events // 10)
    rng = random.Random(9)
    times: dict[str, list[float]] = {"shred": [], "closed": [], "plain": []}
    with (
        Ledger(shred_loc, **SHRED) as shred,
        Ledger(shred_loc) as closed,
        Ledger(plain_loc) as plain,
    ):
        books = [("shred", shred), ("closed", closed), ("plain", plain)]
        for _ in range(min(200, n_reads)):  # warm caches and code paths
            s = f"acct:{rng.randrange(subjects)}"
            for _name, book in books:
                book.as_of(subject=s)
        for i in range(n_reads):
            s = f"acct:{rng.randrange(subjects)}"
            for name, book in books[i % 3 :] + books[: i % 3]:
                start = time.perf_counter()
                book.as_of(subject=s)
                times[name].append((time.perf_counter() - start) * 1e3)
        check = f"acct:{rng.randrange(subjects)}"
        assert shred.as_of(subject=check) == plain.as_of(subject=check), "answers differ"
    out: dict[str, float] = {}
    for name, samples in times.items():
        out[f"as_of_{name}_p50_ms"] = _pct(samples, 0.5)
        out[f"as_of_{name}_p99_ms"] = _pct(samples, 0.99)
    return out


def _over(plain: float, shred: float) -> str:
    return f"{(shred / plain - 1) * 100:+.1f}%"


def report(backend: str, r: dict[str, Any]) -> str:
    rows = [
        ("durable single append", r["append_plain_per_s"], r["append_shred_per_s"], "/s", True),
        ("durable single append p50", r["append_plain_p50_ms"], r["append_shred_p50_ms"], "ms", False),
        ("batched ingest (assert_many)", r["ingest_plain_per_s"], r["ingest_shred_per_s"], "/s", True),
        ("as-of p50, same ledger", r["as_of_closed_p50_ms"], r["as_of_shred_p50_ms"], "ms", False),
        ("as-of p99, same ledger", r["as_of_closed_p99_ms"], r["as_of_shred_p99_ms"], "ms", False),
        ("as-of p99 vs a plain ledger", r["as_of_plain_p99_ms"], r["as_of_shred_p99_ms"], "ms", False),
    ]  # fmt: skip
    lines = [
        f"### {backend}: {r['appends']} appends, {r['ingest']:,} ingested, "
        f"{r['events']:,}-event ledger, {r['reads']} reads",
        "",
        "| figure | plain | crypto-shred | overhead | target |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, plain, shred, unit, write in rows:
        over = _over(shred, plain) if write else _over(plain, shred)
        target = "<= +10%" if write or "append" in name else ""
        lines.append(f"| {name} | {plain:,.3f} {unit} | {shred:,.3f} {unit} | {over} | {target} |")
    return "\n".join(lines)


def run(backend: str, workdir: Path, args: argparse.Namespace, pg: Any) -> dict[str, Any]:
    def make(name: str) -> str:
        if backend == "postgres":
            db = f"s_{name.replace('-', '_')}"
            for stale in (db, f"{db}_keys"):
                pg.drop_database(stale)
            pg.create_database(f"{db}_keys")
            return f"{pg.create_database(db)}&table=events"
        path = workdir / backend / f"{name}.{backend}"
        path.parent.mkdir(parents=True, exist_ok=True)
        for old in path.parent.glob(f"{path.name}*"):
            old.unlink()
        return str(path)

    result: dict[str, Any] = {
        "backend": backend,
        "appends": args.appends,
        "ingest": args.ingest,
        "events": args.events,
        "reads": args.reads,
        "load_average": os.getloadavg()[0],
    }
    print(f"{backend}: appending ...", file=sys.stderr)
    result.update(appends(make, args.appends))
    print(f"{backend}: ingesting ...", file=sys.stderr)
    result.update(ingest(make, args.ingest))
    print(f"{backend}: reading ...", file=sys.stderr)
    result.update(reads(make, args.events, args.reads))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", nargs="+", default=["jsonl", "sqlite", "postgres"])
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--ingest", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--reads", type=int, default=3000)
    parser.add_argument("--quick", action="store_true", help="small counts, about a minute")
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    if args.quick:
        args.appends, args.ingest, args.events, args.reads = 300, 20_000, 20_000, 1000
    workdir = args.dir or Path(tempfile.mkdtemp(prefix="acs-bench-shred-"))
    pg = None
    if "postgres" in args.backend:
        from agent_custody_state_conformance.postgres import start_embedded_postgres

        base = Path(tempfile.mkdtemp(prefix="acs-bench-pg-"))
        os.chmod(base, 0o755)
        pg = start_embedded_postgres(base)
    results = []
    try:
        for backend in args.backend:
            result = run(backend, workdir, args, pg)
            results.append(result)
            print(report(backend, result) + "\n", flush=True)
    finally:
        if pg is not None:
            pg.stop()
        if args.dir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    OUT.mkdir(exist_ok=True)
    (OUT / "shred.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

"""Event-backend benchmarks (issue 3): each figure beside a baseline measured in the same run.

Builds ledgers of 1 million and 10 million events (a generated history over many subjects, four
predicates each, with supersession chains, retractions, confirmations, holds and releases, in
eight spaces, each subject's events spread over the whole file) and measures:

* as-of read by subject, p50/p99 -- ``Ledger.as_of(subject=...)`` beside ONE hand-written
  indexed SQL query computing the same answer (current, unretracted, unsuperseded asserts of the
  subject) on the raw driver, rows parsed with ``json.loads``;
* single durable append rate -- ``Ledger.assert_fact`` beside a raw ``BEGIN IMMEDIATE; INSERT;
  COMMIT`` with the same pragmas (WAL, synchronous=FULL);
* batched ingest rate -- ``Ledger.import_events`` and ``Ledger.assert_many`` beside a raw
  ``executemany`` of the same rows (already serialised) in transactions of the same size;
* open time and peak RSS while reading, in a fresh process.

Usage::

    python bench/bench_backends.py                         # SQLite, 1M and 10M events
    python bench/bench_backends.py --events 1000000 --backend sqlite postgres
    python bench/bench_backends.py --events 10000000 --keep  # reuse a built ledger
    python bench/bench_backends.py --quick                 # a smoke run: 20,000 events, SQLite

The 1M ledger is built through the ledger's batch path (``import_events``); the 10M one is loaded
with direct SQL (rows from the same generator, indexes created after the load), which is only
a faster way to get the same file. Results go to ``bench/out/backends-<size>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchkit.backend_figures import appends, ingest, read_phase
from benchkit.history import build_sqlite_direct, build_with_ledger

OUT = Path(__file__).resolve().parent / "out"


# -- driver --------------------------------------------------------------------------------------


def _warm(path: str) -> None:
    """Read the file once so the OS page cache holds it, as it would for a running server
    (the same for the raw baseline and the ledger; page cache is not the reader's RSS)."""
    with open(path, "rb") as fh:
        while fh.read(1 << 24):
            pass


def _subprocess_read(location: str, n_events: int, reads: int, backend: str) -> dict[str, Any]:
    if backend == "sqlite":
        _warm(location)
    out = subprocess.run(
        [sys.executable, __file__, "--phase-read", location, str(n_events), str(reads), backend],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _row(name: str, ours: float, base: float | None, unit: str, target: str) -> str:
    ratio = f"{ours / base:.2f}x" if base else "-"
    base_s = f"{base:,.3f}" if base is not None else "-"
    return f"| {name} | {ours:,.3f} {unit} | {base_s} | {ratio} | {target} |"


def report(size: int, backend: str, r: dict[str, Any]) -> str:
    lines = [
        f"### {backend}, {size:,} events (build {r['build_s']:.0f} s, {r['build_method']})",
        "",
        "| figure | ours | baseline (raw, same run) | ours/baseline | target |",
        "| --- | --- | --- | --- | --- |",
        _row("as-of by subject p50", r["as_of_p50_ms"], r["raw_p50_ms"], "ms", ""),
        _row("as-of by subject p99", r["as_of_p99_ms"], r["raw_p99_ms"], "ms", "< 1 ms, <= 3x raw"),
        _row(
            "as-of by subject, CPU time p50", r["as_of_cpu_p50_ms"], r["raw_cpu_p50_ms"], "ms", ""
        ),
        _row(
            "as-of by subject, CPU time p99", r["as_of_cpu_p99_ms"], r["raw_cpu_p99_ms"], "ms", ""
        ),
        _row(
            "single durable append", r["append_per_s"], r["raw_append_per_s"], "/s", ">= 0.6x raw"
        ),
        _row(
            "batched ingest (import_events)",
            r["import_per_s"],
            r["raw_executemany_per_s"],
            "/s",
            ">= 40,000/s",
        ),
        _row(
            "batched ingest (assert_many)",
            r["assert_many_per_s"],
            r["raw_executemany_per_s"],
            "/s",
            ">= 40,000/s",
        ),
        _row("open", r["open_s"] * 1e3, None, "ms", "< 1000 ms"),
        _row("peak RSS while reading", r["peak_rss_mb"], None, "MB", "< 300 MB"),
        _row("count()", r["count_s"] * 1e3, None, "ms", ""),
        "",
        f"load average during the reads: {r['load_average']:.1f} on {os.cpu_count()} CPUs. "
        f"{r['reads']} reads; answers that differed between ledger and raw SQL: "
        f"{r['answers_differ']} (the raw query skips only retracted middle links).",
    ]
    return "\n".join(lines)


def run(size: int, backend: str, workdir: Path, args: argparse.Namespace, pg: Any) -> str:
    def make_location(name: str) -> str:
        if backend == "sqlite":
            path = workdir / f"{name}-{size}.sqlite"
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            return str(path)
        db = f"b_{name}_{size}"
        pg.drop_database(db)
        return pg.create_database(db)

    result: dict[str, Any] = {"events": size, "backend": backend}
    if backend == "sqlite":
        location = str(workdir / f"ledger-{size}.sqlite")
        if args.keep and Path(location).exists():
            result.update(build_s=0.0, build_method="reused")
        else:
            Path(location).unlink(missing_ok=True)
            if size > 2_000_000:
                result.update(
                    build_s=build_sqlite_direct(Path(location), size),
                    build_method="direct SQL, indexes after",
                )
            else:
                result.update(
                    build_s=build_with_ledger(location, size),
                    build_method="Ledger.import_events batches of 5000",
                )
    else:
        location = make_location("ledger")
        result.update(
            build_s=build_with_ledger(location, size),
            build_method="Ledger.import_events batches of 5000",
        )
    if args.build_only:
        return f"built {location} in {result['build_s']:.0f} s ({result['build_method']})"
    print(f"reading {size:,} ...", file=sys.stderr)
    result.update(_subprocess_read(location, size, args.reads, backend))
    print("appending ...", file=sys.stderr)
    result.update(appends(location, backend, args.appends))
    print("ingesting ...", file=sys.stderr)
    result.update(ingest(make_location, backend, args.ingest))
    OUT.mkdir(exist_ok=True)
    (OUT / f"backends-{backend}-{size}.json").write_text(json.dumps(result, indent=2))
    return report(size, backend, result)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--phase-read":
        location, n, reads, backend = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
        print(json.dumps(read_phase(location, n, reads, backend)))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="+", default=None)
    parser.add_argument("--backend", nargs="+", default=["sqlite"], choices=["sqlite", "postgres"])
    parser.add_argument("--dir", type=Path, default=None, help="where ledgers are built")
    parser.add_argument("--reads", type=int, default=3000)
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--ingest", type=int, default=100_000)
    parser.add_argument("--keep", action="store_true", help="reuse a built SQLite ledger")
    parser.add_argument(
        "--build-only", action="store_true", help="build the ledgers, measure nothing"
    )
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 20,000 events, small counts"
    )
    args = parser.parse_args()
    if args.quick:
        args.reads, args.appends, args.ingest = min(args.reads, 300), 60, 10_000
    args.events = args.events or ([20_000] if args.quick else [1_000_000, 10_000_000])
    workdir = args.dir or Path(tempfile.gettempdir()) / "acs-bench"
    workdir.mkdir(parents=True, exist_ok=True)
    pg = None
    if "postgres" in args.backend:
        from agent_custody_state_conformance.postgres import start_embedded_postgres

        base = Path(tempfile.mkdtemp(prefix="acs-bench-pg-"))
        os.chmod(base, 0o755)
        pg = start_embedded_postgres(base)
    try:
        for backend in args.backend:
            for size in args.events:
                text = run(size, backend, workdir, args, pg)
                print(text + "\n", flush=True)
    finally:
        if pg is not None:
            pg.stop()


if __name__ == "__main__":
    main()

"""Reads and open at the floor (issue 15, section 3): as-of, ``history`` and ``get`` beside the
raw indexed query of the same run, and the open time and peak memory, on a large ledger.

The ledger is built fast (``--build``): rows in the exact stored format (``stored_rows``, which
the build first checks against the ledger's own encoding) inserted with a raw ``executemany``
(SQLite, indexes made after the load) or ``COPY`` (PostgreSQL). A SQLite ledger is cached in the
temporary directory (``acs-bench-reads/``) and reused by later runs; ``--build`` rebuilds it.
PostgreSQL is built in an embedded server per run.

The reads run in a fresh process: ``Ledger(location)`` timed (open), then per random subject,
in turns with the raw query (neither always first), wall and CPU time of

* ``as_of(subject=...)`` against one hand-written indexed SQL query computing the same answer;
* ``history(fact_id)`` and ``get(fact_id)`` against the one statement the backend runs for it
  (its compiled SQL on the raw driver), rows parsed with ``json.loads``;

and the process's peak RSS (``VmHWM``) after them. Usage: ``python bench/bench_reads.py
[--quick] [--events N] [--backend sqlite postgres] [--build] [--build-only]``; results go to
``bench/out/reads-<backend>-<events>.json``.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit.history import build_postgres_direct, build_sqlite_direct
from benchkit.read_figures import FIGURES, read_phase

OUT = Path(__file__).resolve().parent / "out"
CACHE = Path(tempfile.gettempdir()) / "acs-bench-reads"


def _warm(path: str) -> None:
    """Read the file once so the page cache holds it, as for a running server (the same for the
    raw baseline and the ledger; the page cache is not the reader's RSS). Into one reused
    buffer: a fresh 16 MB object per read (as this did) faulted in 7 GB of new memory for a
    7 GB file, and what the kernel did after it (reclaim and compaction, we take it; not
    traced) slowed the reads that followed: the SQLite ``get`` p99 read 3.1-3.4x its raw query
    right after such a warm-up, 1.5-1.6x after ``cat``-sized reads of the same file."""
    buffer = bytearray(1 << 20)
    with open(path, "rb", buffering=0) as fh:
        while fh.readinto(buffer):
            pass


def _read_in_child(location: str, n: int, reads: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--phase-read", location, str(n), str(reads)],
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def report(backend: str, n: int, r: dict[str, Any]) -> str:
    lines = [
        f"### {backend}, {n:,} events (build {r['build_s']:.0f} s)",
        "",
        "| read | p50 wall | p99 wall | p50 CPU | p99 CPU | raw p50 / p99 wall | raw p50 / p99 "
        "CPU | ratio p50, p99 (CPU) | target |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name in FIGURES:
        o, b = r[name], r[f"raw_{name}"]
        lines.append(
            f"| {name} | {o['p50']:.3f} | {o['p99']:.3f} | {o['cpu_p50']:.3f} | "
            f"{o['cpu_p99']:.3f} | {b['p50']:.3f} / {b['p99']:.3f} | {b['cpu_p50']:.3f} / "
            f"{b['cpu_p99']:.3f} | {o['cpu_p50'] / b['cpu_p50']:.2f}x, {o['cpu_p99'] / b['cpu_p99']:.2f}x "
            "| p99 < 1 ms, <= 2x raw |"
        )
    lines += [
        "",
        f"(ms) open {r['open_s'] * 1e3:.0f} ms, peak RSS {r['peak_rss_mb']:.0f} MB (targets "
        f"< 1000 ms, < 300 MB); {r['reads']} reads of each kind; load average "
        f"{r['load_average']:.1f}; answers that differed from the raw query: {r['differ']}",
    ]
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--phase-read":
        location, n, reads = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        print(json.dumps(read_phase(location, n, reads)))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200,000 events, 1,000 reads")
    parser.add_argument("--events", type=int, default=None, help="default 10,000,000")
    parser.add_argument(
        "--reads",
        type=int,
        default=None,
        help="default 10,000 (a p99 is then the 100th slowest: one burst of noise moves less)",
    )
    parser.add_argument("--backend", nargs="+", default=["sqlite"], choices=["sqlite", "postgres"])
    parser.add_argument("--build", action="store_true", help="rebuild the cached SQLite ledger")
    parser.add_argument("--build-only", action="store_true", help="build, measure nothing")
    args = parser.parse_args()
    n = args.events or (200_000 if args.quick else 10_000_000)
    reads = args.reads or (1000 if args.quick else 10_000)
    CACHE.mkdir(exist_ok=True)
    for backend in args.backend:
        pg = None
        result: dict[str, Any] = {"events": n, "backend": backend, "build_s": 0.0}
        try:
            if backend == "sqlite":
                location = str(CACHE / f"ledger-{n}.sqlite")
                if args.build or not Path(location).exists():
                    for suffix in ("", "-wal", "-shm"):
                        Path(f"{location}{suffix}").unlink(missing_ok=True)
                    result["build_s"] = build_sqlite_direct(Path(location), n)
                _warm(location)
            else:
                from agent_custody_state_conformance.postgres import start_embedded_postgres

                base = Path(tempfile.mkdtemp(prefix="acs-bench-reads-pg-"))
                os.chmod(base, 0o755)
                pg = start_embedded_postgres(base)
                location = str(pg.create_database("reads"))
                result["build_s"] = build_postgres_direct(location, n)
            if args.build_only:
                print(f"built {backend} {n:,} in {result['build_s']:.0f} s: {location}")
                continue
            result.update(_read_in_child(location, n, reads))
        finally:
            if pg is not None:
                pg.stop()
        OUT.mkdir(exist_ok=True)
        (OUT / f"reads-{backend}-{n}.json").write_text(json.dumps(result, indent=1))
        print(report(backend, n, result) + "\n", flush=True)


if __name__ == "__main__":
    main()

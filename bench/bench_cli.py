"""Command-line timings (issue 14): ``--help``, and the inspection commands on a large ledger.

Every figure is the wall time of a fresh ``python -m agent_custody_state ...`` process, as an
operator sees it, beside two baselines measured in the same run: the bare interpreter
(``python -c pass``) and the same read done in process on an already open ledger, so the
difference is start-up and printing.

* ``--help`` and ``--version``: median of 20 runs (issue 14 asks for under 0.3 s), after a
  warm-up run, with bytecode cached as for an installed command;
* a SQLite ledger of 1M events (``benchkit.history.generate``: 100k subjects, four predicates,
  supersession chains, retractions, confirmations, holds) built by the ``import`` command from a
  JSONL export (its time and peak memory are reported too);
* ``facts --subject``, ``facts --subject --json``, ``timeline``, ``timeline --json``,
  ``history``, ``show`` for a few subjects spread over the file (median and max), and one
  ``facts`` over the whole ledger (the table shows 100 rows, the as-of read covers all).

Usage::

    python bench/bench_cli.py                # 1M events (a few minutes to build)
    python bench/bench_cli.py --quick        # 20k events, for a smoke run
    python bench/bench_cli.py --keep DIR     # build once into DIR, reuse it next time

Results go to ``bench/out/cli-<events>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agent_custody_state import Ledger
from benchkit.history import EVENTS_PER_SUBJECT, PREDICATES, _fid, generate

OUT = Path(__file__).resolve().parent / "out"
CLI = [sys.executable, "-m", "agent_custody_state"]
# As an installed command runs: bytecode cached. With PYTHONDONTWRITEBYTECODE set (as in some
# CI shells) every run would compile SQLAlchemy and the rest from source, about a second.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(*args: str, command: list[str] | None = None) -> tuple[float, float]:
    """Wall and CPU seconds of one process (output discarded; a failure stops the benchmark).
    CPU time is reported beside wall time: on a shared machine the wall time includes waiting
    for a core."""
    cpu, start = _cpu(), time.perf_counter()
    done = subprocess.run([*(command or CLI), *args], capture_output=True, text=True, env=ENV)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {done.stderr.strip()}")
    return elapsed, _cpu() - cpu


def _stats(samples: list[tuple[float, float]]) -> dict[str, float]:
    walls = [wall for wall, _ in samples]
    return {
        "median_s": round(statistics.median(walls), 4),
        "max_s": round(max(walls), 4),
        "median_cpu_s": round(statistics.median(cpu for _, cpu in samples), 4),
        "runs": len(samples),
    }


def _interpreter(runs: int) -> dict[str, float]:
    return _stats([_run("-c", "pass", command=[sys.executable]) for _ in range(runs)])


def build(ledger: Path, events: int) -> dict[str, Any]:
    """Write the generated history as a JSONL export, then ``import`` it (timed)."""
    export = ledger.with_suffix(".jsonl")
    with open(export, "w", encoding="utf-8") as fh:
        for event in generate(events):
            fh.write(event.to_json() + "\n")
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    seconds, _ = _run("import", "--ledger", str(ledger), "--from", str(export))
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    export.unlink()
    return {
        "import_s": round(seconds, 2),
        "import_events_per_s": round(events / seconds),
        "import_peak_rss_mb": round(max(peak, before) / 1024),
    }


def measure(ledger: Path, events: int, runs: int) -> dict[str, Any]:
    subjects = max(1, events // EVENTS_PER_SUBJECT)
    picks = [subjects * i // runs for i in range(runs)]
    loc = ("--ledger", str(ledger))
    results: dict[str, Any] = {}
    commands = {
        "facts --subject": lambda s: ("facts", *loc, "--subject", f"acct:{s}"),
        "facts --subject --json": lambda s: ("facts", *loc, "--subject", f"acct:{s}", "--json"),
        "timeline": lambda s: ("timeline", f"acct:{s}", *loc),
        "timeline --json": lambda s: ("timeline", f"acct:{s}", *loc, "--json"),
        "history": lambda s: ("history", _fid(s, 0, 0), *loc),
        "show": lambda s: ("show", _fid(s, 0, 0), *loc),
    }
    for name, argv in commands.items():
        _run(*argv(picks[0]))  # warm: bytecode written, pages cached
        results[name] = _stats([_run(*argv(s)) for s in picks])
    # The same reads in process, on an open ledger: the floor the CLI adds start-up to.
    with Ledger(ledger) as opened:
        reads = {
            "as_of(subject)": lambda s: opened.as_of(subject=f"acct:{s}"),
            "timeline(subject)": lambda s: opened.timeline(f"acct:{s}"),
        }
        results["in process"] = {}
        for name, read in reads.items():
            samples = []
            for s in picks:
                cpu, start = time.process_time(), time.perf_counter()
                read(s)
                samples.append((time.perf_counter() - start, time.process_time() - cpu))
            results["in process"][name] = _stats(samples)
    results["facts (whole ledger, 100 rows shown)"] = _stats([_run("facts", *loc)])
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="20k events instead of 1M")
    parser.add_argument("--events", type=int, help="ledger size (default 1M, --quick 20k)")
    parser.add_argument("--runs", type=int, default=20, help="samples per figure (default 20)")
    parser.add_argument("--keep", metavar="DIR", help="build the ledger in DIR and reuse it")
    args = parser.parse_args()
    events = args.events or (20_000 if args.quick else 1_000_000)
    report: dict[str, Any] = {"events": events, "predicates": len(PREDICATES)}
    report["python -c pass"] = _interpreter(args.runs)
    _run("--help")  # warm
    report["--help"] = _stats([_run("--help") for _ in range(args.runs)])
    report["--version"] = _stats([_run("--version") for _ in range(args.runs)])
    print(f"--help: {report['--help']}", file=sys.stderr)
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-cli-"))
    folder.mkdir(parents=True, exist_ok=True)
    ledger = folder / f"cli-{events}.sqlite"
    if not ledger.exists():
        print(f"building {events:,} events (import) in {ledger}", file=sys.stderr)
        report["build"] = build(ledger, events)
    report["ledger_mb"] = round(ledger.stat().st_size / 2**20)
    report.update(measure(ledger, events, args.runs))
    if not args.keep:
        ledger.unlink()
        folder.rmdir()
    OUT.mkdir(exist_ok=True)
    target = OUT / f"cli-{events}.json"
    target.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    print(f"written to {os.path.relpath(target)}", file=sys.stderr)


if __name__ == "__main__":
    main()

"""Print the figures of the last run of each reliability test as the table in docs/reliability.md.

    python tests/reliability/summarize.py [--stress] [results.jsonl]

Reads ``tests/reliability/.results.jsonl`` (what ``support.record`` appends), keeps the latest
record per test (of the stress run with ``--stress``, else of any run), and prints one Markdown
row per test: what was tried, and what was lost.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

LOSS_KEYS = (
    "events_lost",
    "lost_writes",
    "acknowledged_not_durable",
    "crashes",
    "hangs",
    "escalations",
    "accepted",
    "leaks",
    "bytes_found",
    "bytes_found_ledger",
    "bytes_found_langgraph",
    "residue_bytes_found",
    "failures",
    "two_current_values",
    "refused_calls_changing_files",
    "half_events_visible",
    "silently_skipped",
    "erased_bytes_found",
    "server_deaths",
)
TRIED_KEYS = (
    "kill_points",
    "faults_injected",
    "cuts",
    "cases",
    "operations",
    "calls",
    "checks",
    "needles",
)


def latest(path: Path, stress: bool) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        if stress and not record.get("stress"):
            continue
        rows[record["test"]] = record
    return rows


def main(argv: list[str]) -> int:
    stress = "--stress" in argv
    args = [a for a in argv if a != "--stress"]
    path = Path(args[0]) if args else Path(__file__).with_name(".results.jsonl")
    rows = latest(path, stress)
    print("| test | tried | detail | lost / leaked |")
    print("| --- | ---: | --- | ---: |")
    for name in sorted(rows):
        record = rows[name]
        tried = next(
            (f"{record[k]:,} {k.replace('_', ' ')}" for k in TRIED_KEYS if k in record), ""
        )
        losses = sum(int(record[k]) for k in LOSS_KEYS if isinstance(record.get(k), int))
        detail = ", ".join(
            f"{k}={v}"
            for k, v in record.items()
            if k not in ("test", "stress", "at", *LOSS_KEYS, *TRIED_KEYS)
        )
        print(f"| `{name}` | {tried} | {detail[:300]} | {losses} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Shared machinery of the reliability tests: the stress switch, figures, the fault shim, scans.

``STRESS`` (environment ``AGENT_CUSTODY_STRESS=1``) selects the long versions; ``scale(short,
long)`` picks the figure. ``record(name, **figures)`` prints a test's figures and appends them as
one JSON line to ``tests/reliability/.results.jsonl`` (git-ignored), which is where the table in
``docs/reliability.md`` comes from. ``build_faultshim`` compiles the LD_PRELOAD fault injector.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
REPO = HERE.parent.parent
STRESS = os.environ.get("AGENT_CUSTODY_STRESS", "") == "1"
RESULTS = Path(os.environ.get("AGENT_CUSTODY_RESULTS", HERE / ".results.jsonl"))

#: Figures recorded in this pytest process, printed again in the terminal summary.
COLLECTED: list[dict[str, Any]] = []


def scale(short: int, long: int) -> int:
    """The short figure in a normal run, the long one under ``AGENT_CUSTODY_STRESS=1``."""
    return long if STRESS else short


def record(name: str, **figures: Any) -> dict[str, Any]:
    """Print a test's figures and append them to the results file; returns the record."""
    line = {
        "test": name,
        "stress": STRESS,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        **figures,
    }
    COLLECTED.append(line)
    print("FIGURES " + json.dumps(line, sort_keys=False))
    with open(RESULTS, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")
    return line


# -- the LD_PRELOAD fault shim ---------------------------------------------------------------


def build_faultshim(out_dir: Path) -> tuple[Path | None, str]:
    """Compile ``faultshim.c``; returns (path, "") or (None, why it could not be built)."""
    if not sys.platform.startswith("linux"):
        return None, "the fault shim interposes glibc calls with LD_PRELOAD (Linux only)"
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if compiler is None:
        return None, "no C compiler (cc/gcc) to build the LD_PRELOAD fault shim"
    out = out_dir / "faultshim.so"
    proc = subprocess.run(
        [compiler, "-shared", "-fPIC", "-O1", "-o", str(out), str(HERE / "faultshim.c"), "-ldl"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        return None, f"the fault shim did not compile: {proc.stderr.strip()[:500]}"
    return out, ""


# -- scanning files for bytes -----------------------------------------------------------------


def files_under(root: Path) -> list[Path]:
    """Every regular file under ``root`` (sockets and vanished files skipped)."""
    found = []
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            try:
                if path.is_file() and not path.is_symlink():
                    found.append(path)
            except OSError:
                continue
    return sorted(found)


def scan(files: Iterable[Path], needles: Iterable[bytes]) -> dict[bytes, list[str]]:
    """Which of ``needles`` occur in which of ``files`` (only hits are returned)."""
    wanted = [n for n in dict.fromkeys(needles) if n]
    hits: dict[bytes, list[str]] = {}
    if not wanted:
        return hits
    for path in files:
        try:
            data = path.read_bytes()
        except (FileNotFoundError, IsADirectoryError, PermissionError):
            continue
        for needle in wanted:
            if needle in data:
                hits.setdefault(needle, []).append(str(path))
    return hits


def digest_files(files: Iterable[Path]) -> str:
    """One sha256 over the names and bytes of ``files`` (missing files count as absent)."""
    h = hashlib.sha256()
    for path in files:
        h.update(str(path).encode() + b"\0")
        try:
            h.update(path.read_bytes())
        except FileNotFoundError:
            h.update(b"<absent>")
        h.update(b"\0")
    return h.hexdigest()


# -- processes ---------------------------------------------------------------------------------


def python() -> str:
    return sys.executable


def cli() -> list[str]:
    """The command line tool, run with this interpreter (no reliance on PATH)."""
    return [
        sys.executable,
        "-c",
        "import sys; from agent_custody_state.cli import main; sys.exit(main())",
    ]


def wait_for(predicate: Any, timeout: float, what: str, interval: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def run_planned(
    zygote: Any,
    plan: dict[str, Any],
    params: dict[str, Any],
    known: Any,
    ack: Path,
    tmp_path: Path,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run one worker under ``plan`` (a timer kill is sent from here); its exit status and the
    acknowledgement lines it wrote."""
    pid = zygote.run(**params)
    if plan["mode"] == "timer":
        time.sleep(plan["delay"])
        os.kill(pid, signal.SIGKILL)
    status = zygote.wait(pid, timeout=120)
    assert not status["hung"], f"worker hung ({plan}); see {tmp_path}/zygote.log"
    return status, known.read(ack)
